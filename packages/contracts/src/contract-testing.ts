/** The HTTP status a client call failed with; fails the test when the call succeeded. For the contract suites. */
export async function statusOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (e) {
    return (e as { status: number }).status;
  }
  throw new Error('expected the call to fail');
}

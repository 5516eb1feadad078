/** What the template route tests (routes-*.test.ts) share: the registry image most templates there are made from. */
export const IMAGE = { image: 'registry.example/library/node:22' };

/** `time.mjs [--local-timezone ZONE]`: svc's time server on stdio (the gateway starts it). */
import { createTimeServer, isTimeZone } from './time.ts';
import { flagValue, serveStdio } from './stdio.ts';

const flag = flagValue(process.argv, '--local-timezone');
if (flag !== undefined && !isTimeZone(flag)) {
  console.error(`Error: invalid --local-timezone '${flag}': not a known IANA timezone name`);
  process.exit(1);
}
const local = flag ?? [process.env.TZ, Intl.DateTimeFormat().resolvedOptions().timeZone].find((z): z is string => !!z && isTimeZone(z)) ?? 'UTC';
await serveStdio(createTimeServer(local), 'time');

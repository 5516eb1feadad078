/**
 * The fake API's volume routes (fake-api.ts): no plugins behind them, the drivers are names, and a
 * volume is in use while a running sandbox mounts it.
 */
import type { FastifyInstance, FastifyReply, HTTPMethods, RouteHandlerMethod } from 'fastify';
import { randomUUID } from 'node:crypto';
import { PUBLIC_API, type PublicPath } from '@svc/contracts';
import { VOLUME_CODES, VOLUME_LIMITS, VOLUME_NAME_PATTERN } from '@svc/contracts/volumes';
import { fakeError as err, type FakeOn } from './fake-routes.ts';

export interface VolumeRow {
  volumeID: string;
  name: string;
  driver: string;
  token: string;
}

export function serveFakeVolumes(
  app: FastifyInstance,
  on: FakeOn,
  o: { volumes: Map<string, VolumeRow>; drivers: string[]; sandboxes: () => Iterable<{ state: string; volumeMounts: { name: string }[] }> },
): void {
  // Checked against the document once it describes them; until then plain routes, the reference in
  // a wildcard as the gateway takes it (a name may be longer than the router's 100-character cap on a parameter).
  const documented = (method: HTTPMethods, path: string) =>
    (PUBLIC_API.paths as unknown as Record<string, Record<string, unknown> | undefined>)[path]?.[method.toLowerCase()] !== undefined;
  const onVolumes = (method: HTTPMethods, path: string, handler: (req: any, reply: FastifyReply) => unknown) =>
    documented(method, path)
      ? on(method, path as PublicPath, handler)
      : app.route({ method, url: path.replace('{volumeID}', '*'), handler: handler as RouteHandlerMethod });
  const volumeRef = (req: { params: { volumeID?: string; '*'?: string } }) => req.params.volumeID ?? req.params['*'] ?? '';
  /** By id, then by name, as the gateway resolves a volume reference. */
  const findVolume = (ref: string) => o.volumes.get(ref) ?? [...o.volumes.values()].find((v) => v.name === ref);
  const volumeInUse = (v: VolumeRow) =>
    [...o.sandboxes()].some((s) => s.state === 'running' && s.volumeMounts.some((m) => m.name === v.volumeID || m.name === v.name));

  onVolumes('GET', '/volumes', async () => [...o.volumes.values()].map((v) => ({ volumeID: v.volumeID, name: v.name })));
  onVolumes('POST', '/volumes', async (req, reply) => {
    const b = (req.body ?? {}) as { name?: unknown; driver?: unknown };
    if (b.name !== undefined) {
      if (typeof b.name !== 'string' || b.name.length > VOLUME_LIMITS.nameChars || !VOLUME_NAME_PATTERN.test(b.name)) {
        return err(reply, 400, `name must match ${VOLUME_NAME_PATTERN.source}, at most ${VOLUME_LIMITS.nameChars} characters`);
      }
      if ([...o.volumes.values()].some((v) => v.name === b.name)) return err(reply, 400, `Volume with name '${b.name}' already exists`);
    }
    if (b.driver !== undefined && typeof b.driver !== 'string') return err(reply, 400, 'driver must be a string');
    const driver = (b.driver as string | undefined) ?? o.drivers[0];
    if (!driver || !o.drivers.includes(driver)) return err(reply, 400, `unknown driver ${JSON.stringify(driver)}`, VOLUME_CODES.unknownDriver);
    const volumeID = randomUUID();
    const row: VolumeRow = { volumeID, name: (b.name as string | undefined) ?? volumeID, driver, token: `vtok-${randomUUID()}` };
    o.volumes.set(volumeID, row);
    return reply.status(201).send({ volumeID, name: row.name, token: row.token });
  });
  onVolumes('GET', '/volumes/{volumeID}', async (req, reply) => {
    const ref = volumeRef(req);
    const v = findVolume(ref);
    return v ? { volumeID: v.volumeID, name: v.name, token: v.token } : err(reply, 404, `volume ${ref} not found`);
  });
  onVolumes('DELETE', '/volumes/{volumeID}', async (req, reply) => {
    const ref = volumeRef(req);
    const v = findVolume(ref);
    if (!v) return err(reply, 404, `volume ${ref} not found`);
    if (volumeInUse(v)) return err(reply, 409, `volume ${ref} is mounted by a sandbox`, VOLUME_CODES.inUse);
    o.volumes.delete(v.volumeID);
    return reply.status(204).send();
  });
}

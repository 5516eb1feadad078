import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { badRequest, notFound, sameSecret, unauthorized, type Logger } from '@svc/common';
import { CONTEXT_FILES_UPLOAD_PATH, isContextFilesHash } from '@svc/contracts';
import { MASTER_DOWNLOAD_ROUTES } from '@svc/contracts/master-downloads';
import type { ExecInput } from '@svc/contracts/node-agent';
import { pathTo, serve } from '@svc/contracts/route-table';
import type { TemplateCenterClient } from '@svc/contracts/template-center';
import { relayFromTemplateCenter } from '../templates/index.ts';
import type { BuildFileRepo } from './build-file-repo.ts';
import { FilesQuota, isReservation } from './files-quota.ts';

/** How long an upload URL is good for. */
const UPLOAD_URL_TTL_SEC = 3600;
const DOWNLOAD = MASTER_DOWNLOAD_ROUTES.templateFiles;

/**
 * A template build's context files (E2B's COPY, docs/templates.md "Copying files"): the SDK asks
 * whether the archive of a files hash is present and, when not, PUTs it to a signed URL of the
 * public API (no API key: the signature, which names the team, is the credential, as E2B's
 * presigned URLs are). The archive goes into the template center's artifact store under an id
 * made of the team and the hash (artifactIdOf); a build's COPY step has the node agent download
 * it through the master and unpack it in the build sandbox. Each team has its own, as in E2B: the
 * hash is the SDK's over the files, which cannot be checked against an archive, and the store
 * keeps the first upload of an id, so a store shared by teams let one team upload first what
 * another team's build copied.
 */
export class ContextFiles {
  private readonly signingKey: string;
  private readonly quota: FilesQuota;

  constructor(private readonly d: {
    templateCenter: TemplateCenterClient; masterAddr: string; signingKey: string; logger: Logger;
    /** Which files are stored and when a build last asked for them (sweep). */
    records: BuildFileRepo;
    /** master.build_files_team_max_mb, in bytes: a team's files stored at once. */
    teamMaxBytes: number;
    now?: () => number;
  }) {
    if (!d.signingKey) d.logger.warn('master.upload_signing_key is empty: upload URLs of build files are signed with a key of this process and work only on this master until it restarts');
    this.signingKey = d.signingKey || randomBytes(32).toString('hex');
    this.quota = new FilesQuota({ records: d.records, teamMaxBytes: d.teamMaxBytes, logger: d.logger, now: () => this.now() });
  }

  /** What the store holds for a team's files hash: enough for a node to download and check it. */
  async input(hash: string, team: string): Promise<ExecInput | undefined> {
    const artifactId = artifactIdOf(team, hash);
    const stored = await this.d.templateCenter.artifactInfo(artifactId);
    if (!stored) return undefined;
    // Asked for by a build (whether present, or its COPY): kept another build_files_keep_days.
    await this.d.records.touch({ artifact_id: artifactId, team_id: team, files_hash: hash, size_bytes: stored.sizeBytes }, this.now());
    return { url: `${this.d.masterAddr.replace(/\/+$/, '')}${pathTo(DOWNLOAD, { team, hash })}`, sha256: stored.sha256, sizeBytes: stored.sizeBytes };
  }

  /** E2B's GET /templates/{templateID}/files/{hash}: present for this team, or where it uploads it. */
  async uploadLink(hash: string, team: string, origin: string): Promise<{ present: boolean; url?: string }> {
    if (!isContextFilesHash(hash)) throw badRequest('hash must be the files hash of 64 hex digits');
    if (await this.input(hash, team)) return { present: true };
    await this.quota.check(team);
    const expires = Math.floor(this.now() / 1000) + UPLOAD_URL_TTL_SEC;
    const query = `team=${encodeURIComponent(team)}&expires=${expires}&signature=${this.sign(hash, team, expires)}`;
    return { present: false, url: `${origin.replace(/\/+$/, '')}${CONTEXT_FILES_UPLOAD_PATH}/${hash}?${query}` };
  }

  /** The upload route (public, through the gateway) and the nodes' download route (MASTER_DOWNLOAD_ROUTES.templateFiles). */
  async registerRoutes(app: FastifyInstance): Promise<void> {
    const download = async (req: FastifyRequest<{ Params: { team: string; hash: string } }>, reply: FastifyReply) => {
      if (!isContextFilesHash(req.params.hash)) throw badRequest('hash must be 64 hex digits');
      if (!isTeamId(req.params.team)) throw badRequest('team must be a team id');
      return relayFromTemplateCenter(reply, this.d.templateCenter, artifactIdOf(req.params.team, req.params.hash), req.method === 'HEAD');
    };
    // HEAD first, the same handler: the GET would otherwise bring fastify's own HEAD, which answers content-length 0.
    app.route({ method: 'HEAD', url: DOWNLOAD.path, handler: download });
    serve(app, DOWNLOAD, download);
    await app.register(async (scope) => {
      scope.removeAllContentTypeParsers();
      // The handler streams req.raw into the store itself.
      scope.addContentTypeParser('*', (_req, _payload, done) => done(null));
      scope.put<{ Params: { hash: string }; Querystring: { team?: string; expires?: string; signature?: string } }>(`${CONTEXT_FILES_UPLOAD_PATH}/:hash`, async (req, reply) => {
        const { hash } = req.params;
        const { team } = req.query;
        if (!isContextFilesHash(hash)) throw notFound('no such upload');
        if (typeof team !== 'string' || !isTeamId(team)) throw unauthorized('the upload URL lacks its team parameter; ask GET /templates/{templateID}/files/{hash} for one');
        this.checkSignature(hash, team, req.query.expires, req.query.signature);
        // Its content-length is counted before the body is read, and the store takes no more.
        const sizeBytes = contentLength(req);
        const artifactId = artifactIdOf(team, hash);
        const release = await this.quota.reserve(team, hash, sizeBytes, artifactId);
        try {
          await this.d.templateCenter.putLayer(artifactId, { sizeBytes }, req.raw);
          await this.d.records.touch({ artifact_id: artifactId, team_id: team, files_hash: hash, size_bytes: sizeBytes }, this.now());
        } finally {
          await release();
        }
        return reply.status(200).send({ hash, sizeBytes });
      });
    });
  }

  /**
   * Removes from the store the files no build asked for in `keepMs` (master.build_files_keep_days),
   * a batch at a time; answers how many went. A build that asks for them later is told they are
   * not present, and the SDK uploads them again. Each row is forgotten first, and only while
   * still unused, so files a build has just asked for stay.
   */
  async sweep(keepMs: number, batch = 100): Promise<number> {
    const before = this.now() - keepMs;
    const stale = await this.quota.dropStale();
    if (stale) this.d.logger.warn({ stale }, 'dropped reservations of build files uploads that never ended');
    let removed = 0;
    for (const row of await this.d.records.unusedSince(before, batch)) {
      if (isReservation(row.artifact_id)) continue; // an upload under way: nothing stored yet (dropStale)
      if (!await this.d.records.forgetIfUnused(row.artifact_id, before)) continue;
      try {
        await this.d.templateCenter.deleteArtifact(row.artifact_id);
        removed++;
      } catch (err) {
        // Forgotten but still stored: put the row back as it was, so the next sweep tries again.
        this.d.logger.warn({ artifactId: row.artifact_id, teamId: row.team_id, err: (err as Error).message }, 'removing unused build files from the store failed; the next sweep tries again');
        await this.d.records.touch(row, row.used_at);
      }
    }
    if (removed) this.d.logger.info({ removed, keepDays: keepMs / 86_400_000 }, 'removed build files no build used within master.build_files_keep_days');
    return removed;
  }

  private checkSignature(hash: string, team: string, expires: string | undefined, signature: string | undefined): void {
    if (!expires || !signature) throw unauthorized('the upload URL lacks its expires and signature parameters; ask GET /templates/{templateID}/files/{hash} for one');
    const at = /^\d{1,12}$/.test(expires) ? Number(expires) : NaN;
    // The signature is checked first, so an expired URL is told apart only once it is genuine.
    if (!Number.isFinite(at) || !sameSecret(signature, this.sign(hash, team, at))) throw unauthorized('the upload URL\'s signature is not valid');
    if (at * 1000 < this.now()) throw unauthorized('the upload URL has expired; ask for a new one');
  }

  private sign(hash: string, team: string, expires: number): string {
    return createHmac('sha256', this.signingKey).update(`PUT ${CONTEXT_FILES_UPLOAD_PATH}/${hash} ${team} ${expires}`).digest('hex');
  }

  private now(): number {
    return this.d.now?.() ?? Date.now();
  }
}

/**
 * The store's id of a team's files: a hash of both, since the team's UUID and the files hash side
 * by side (105 characters) pass the 100 a path parameter may have on the template center's routes.
 */
function artifactIdOf(team: string, hash: string): string {
  return `ctx-${createHash('sha256').update(`${team}/${hash}`).digest('hex')}`;
}

/** A team id as the master makes them (a UUID), or anything else that fits an artifact id. */
function isTeamId(team: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9_-]{0,56}$/.test(team);
}

function contentLength(req: FastifyRequest): number {
  const v = req.headers['content-length'];
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n)) throw badRequest('content-length is required: the archive is uploaded with its size');
  return n;
}

import type { S3StoreOptions } from './s3-store.ts';

/**
 * The S3 store is configured through the environment (the shared config file has no section for
 * it yet): SVC_TEMPLATE_CENTER_S3_{ENDPOINT,REGION,BUCKET,ACCESS_KEY_ID,SECRET_ACCESS_KEY,
 * SESSION_TOKEN,PREFIX,FORCE_PATH_STYLE,PRESIGN_EXPIRES_SEC}. Unset endpoint or bucket: no S3 store.
 * PRESIGN_EXPIRES_SEC defaults to 37 days (docs/templates.md); AWS S3 itself refuses SigV4 presigned URLs
 * valid for more than 7 days (604800), so set it there.
 */
export function s3OptionsFromEnv(env: NodeJS.ProcessEnv, scratchDir: string): S3StoreOptions | undefined {
  const v = (k: string) => env[`SVC_TEMPLATE_CENTER_S3_${k}`]?.trim() || undefined;
  const endpoint = v('ENDPOINT');
  const bucket = v('BUCKET');
  if (!endpoint || !bucket) return undefined;
  const accessKeyId = v('ACCESS_KEY_ID');
  const secretAccessKey = v('SECRET_ACCESS_KEY');
  if (!accessKeyId || !secretAccessKey) throw new Error('SVC_TEMPLATE_CENTER_S3_ACCESS_KEY_ID and SVC_TEMPLATE_CENTER_S3_SECRET_ACCESS_KEY are required with an S3 store');
  return {
    endpoint,
    bucket,
    region: v('REGION') ?? 'us-east-1',
    credentials: { accessKeyId, secretAccessKey, sessionToken: v('SESSION_TOKEN') },
    prefix: v('PREFIX'),
    forcePathStyle: v('FORCE_PATH_STYLE') ? /^(1|true|yes)$/i.test(v('FORCE_PATH_STYLE')!) : true,
    presignExpiresSec: v('PRESIGN_EXPIRES_SEC') ? Number(v('PRESIGN_EXPIRES_SEC')) : undefined,
    scratchDir,
  };
}

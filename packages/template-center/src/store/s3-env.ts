import type { SvcConfig } from '@svc/common';
import type { S3StoreOptions } from './s3-store.ts';

/**
 * The S3 store's options from the config (`template_center.s3`, or SVC_TEMPLATE_CENTER_S3_*:
 * docs/configuration.md). Without an endpoint and a bucket there is no S3 store. Presigned URLs
 * last 37 days unless `presign_expires_sec` says otherwise; AWS S3 itself refuses SigV4 presigned
 * URLs valid for more than 7 days (604800), so set it there (docs/templates.md).
 */
export function s3OptionsOf(s3: SvcConfig['template_center']['s3'], scratchDir: string): S3StoreOptions | undefined {
  const endpoint = s3.endpoint.trim();
  const bucket = s3.bucket.trim();
  if (!endpoint || !bucket) return undefined;
  if (!s3.access_key_id || !s3.secret_access_key) throw new Error('template_center.s3.access_key_id and secret_access_key (SVC_TEMPLATE_CENTER_S3_ACCESS_KEY_ID, _SECRET_ACCESS_KEY) are required with an S3 store');
  return {
    endpoint,
    bucket,
    region: s3.region || 'us-east-1',
    credentials: { accessKeyId: s3.access_key_id, secretAccessKey: s3.secret_access_key, sessionToken: s3.session_token || undefined },
    prefix: s3.prefix || undefined,
    forcePathStyle: s3.force_path_style,
    presignExpiresSec: s3.presign_expires_sec > 0 ? s3.presign_expires_sec : undefined,
    scratchDir,
  };
}

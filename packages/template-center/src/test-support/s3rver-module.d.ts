// s3rver ships no type declarations; this covers what the tests use.
declare module 's3rver' {
  import type { Server } from 'node:http';

  export interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    resetOnClose?: boolean;
    allowMismatchedSignatures?: boolean;
    vhostBuckets?: boolean;
    configureBuckets?: Array<{ name: string; configs?: Array<string | Buffer> }>;
  }

  export default class S3rver {
    constructor(options?: S3rverOptions);
    configureBuckets(): Promise<void>;
    /** Creates the HTTP server with s3rver's handler and listens on it. */
    listen(port: number, address: string): Promise<Server>;
    store: {
      existsObject(bucket: string, key: string): Promise<boolean>;
    };
  }
}

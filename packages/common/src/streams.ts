import type { WriteStream } from 'node:fs';

/**
 * Resolves once a file stream has closed. A pipeline can reject before the stream's asynchronous
 * open has created its file; a cleanup that removes the file before this would see it reappear.
 */
export function fileStreamClosed(file: WriteStream): Promise<void> {
  if (file.closed) return Promise.resolve();
  return new Promise((done) => file.once('close', () => done()));
}

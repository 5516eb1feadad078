import { badRequest } from '@svc/common';

/** A query parameter given once (a repeated one arrives as an array, which no lookup can use). */
export function oneQueryValue(v: string | string[] | undefined, name: string): string | undefined {
  if (Array.isArray(v)) throw badRequest(`${name} must be given once`);
  return v;
}

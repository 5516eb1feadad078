/**
 * The envd version reported to clients. The e2b SDK gates features on it; 0.6.4 is the
 * highest gate in e2b 2.51 (watching network mounts), and everything below it is implemented.
 */
export const ENVD_VERSION = '0.6.4';

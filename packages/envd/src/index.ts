// What other packages may use from envd. The agent itself runs from dist/envd.mjs (main.ts).
export { ENVD_VERSION } from '@svc/contracts/envd-version';
export { readConfig, type EnvdConfig } from './config.ts';

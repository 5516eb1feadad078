export { startTemplateCenter, type RunningTemplateCenter, type TemplateCenterOptions } from './template-center.ts';
export { verifyCallbackToken, type TokenCheck } from './callback-token.ts';
export { buildBaseRootfs, type BaseRootfs, type BaseRootfsOptions, type BaseProgress } from './base-template.ts';
export * from './api.ts';

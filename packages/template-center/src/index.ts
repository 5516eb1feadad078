export { startTemplateCenter, type RunningTemplateCenter, type TemplateCenterOptions } from './template-center.ts';
export { baseRootfsPath, buildBaseRootfs, type BaseRootfs, type BaseRootfsOptions, type BaseProgress } from './base-template.ts';

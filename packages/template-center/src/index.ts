export { startTemplateCenter, type RunningTemplateCenter, type TemplateCenterOptions } from './template-center.ts';
export { debianImagePath, ensureDebianImage, type DebianImage } from './debian-image.ts';
export { baseRootfsPath, buildBaseRootfs, ROOTFS_FLAVORS, type BaseRootfs, type BaseRootfsOptions, type BaseProgress, type RootfsFlavor } from './base-template.ts';
export { CA_FINGERPRINT_ENV, caFingerprint } from './rootfs/inject.ts';

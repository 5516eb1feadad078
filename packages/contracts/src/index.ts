export { CONTEXT_FILES_UPLOAD_PATH, isContextFilesHash, isContextFilesUpload, isMasterTemplatePath, MASTER_TEMPLATE_PREFIXES, PUBLIC_API, type PublicPath } from './public-api.ts';
export * as PublicSchemas from './public-api-schemas.ts';
export type * from './public-api-types.ts';

/** Row types of the template tables (templates, build jobs, artifacts, placements). */
export interface TemplateTables {}

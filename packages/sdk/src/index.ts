export { Sandbox, type SandboxConstructorOpts } from './sandbox.ts';
export { Sandbox as default } from './sandbox.ts';
export { Template, type WaitForBuildOpts } from './template.ts';
export { planFromDockerfile, type BuildPlan, type BuildStep } from './dockerfile.ts';
export { buildTemplate, type BuildLogLine, type TemplateBuildOpts, type TemplateBuilt } from './template-build.ts';
export { Node } from './node.ts';
export { ApiKey, Team, type ApiKeyRecord, type CreatedKey, type CreatedTeamInfo, type TeamLimits, type TeamRecord } from './team.ts';
export { Volume, VolumeMount, type VolumeAndToken, type VolumeCreateOpts, type VolumeInfo } from './volume.ts';
export { Paginator, SandboxPaginator, SnapshotPaginator } from './paginator.ts';
export {
  Events, type SandboxEvent, type SandboxEventData, type SandboxEventFollowOpts, type SandboxEventListOpts, type SandboxEventType,
  type SandboxExecution,
} from './events.ts';
export { SANDBOX_EVENT_TYPES } from '@svc/contracts/events';
export {
  Webhooks, verifyWebhookSignature, WEBHOOK_HEADERS, type NewWebhook, type Webhook, type WebhookDeliveryOutcome, type WebhookUpdate,
} from './webhooks.ts';
export { Commands } from './commands.ts';
export { CommandHandle } from './command-handle.ts';
export { Pty } from './pty.ts';
export { Filesystem } from './filesystem.ts';
export { DEFAULT_RUN_CODE_TIMEOUT_MS, type RunCodeOpts, type CreateCodeContextOpts } from './code-interpreter.ts';
export { Execution, OutputMessage, type Result, type ExecutionError, type Logs, type ExecutionCallbacks } from './execution.ts';
export { CODE_INTERPRETER_PORT, CODE_LANGUAGES, type CodeContext, type CodeLanguage } from '@svc/contracts/code-interpreter';
export { WatchHandle } from './watch-handle.ts';
export { ApiClient } from './api-client.ts';
export { dataPlaneDomain } from './sandbox-port.ts';
export { ALL_TRAFFIC } from './network.ts';
export {
  ConnectionConfig, NEVER_TIMEOUT, ENVD_PORT, DEFAULT_API_URL, DEFAULT_SANDBOX_URL, DEFAULT_TEMPLATE,
  type ConnectionOpts,
} from './config.ts';
export {
  SandboxError, TimeoutError, InvalidArgumentError, NotEnoughSpaceError, NotFoundError, FileNotFoundError,
  SandboxNotFoundError, TemplateNotFoundError, VolumeNotFoundError, AuthenticationError, ApiError, ConflictError, GoneError, RateLimitError,
  TemplateError, ServiceBusyError, CommandExitError, type CommandResult, type ErrorDetails,
} from './errors.ts';
export * from './types.ts';

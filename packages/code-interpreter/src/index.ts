// What other packages may use from the code interpreter. The service itself runs from
// dist/code-interpreter.mjs (main.ts).
export { createCodeInterpreter, type CodeInterpreter, type CodeInterpreterOptions } from './server.ts';
export { jsonLog } from './log.ts';

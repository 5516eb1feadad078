/**
 * The contexts of the service: each a kernel, a working directory and a lock that runs its
 * executions one at a time. A language's default context (the one `/execute` with `language`
 * and no `context_id` uses) is created at its first use; python's when the service starts.
 */
import { randomUUID } from 'node:crypto';
import type { CodeContext, CodeLanguage } from '@svc/contracts/code-interpreter';
import type { Kernel, Log } from './kernel.ts';
import { Lock } from './lock.ts';

export interface Context {
  id: string;
  language: CodeLanguage;
  cwd: string;
  kernel: Kernel;
  lock: Lock;
  /** Whether the sandbox's environment variables from envd have been given to the kernel. */
  sandboxEnvApplied: boolean;
}

export type KernelFactory = (language: CodeLanguage, cwd: string) => Kernel;

export class Contexts {
  private readonly byId = new Map<string, Context>();
  private readonly defaults = new Map<CodeLanguage, Promise<Context>>();

  constructor(
    private readonly makeKernel: KernelFactory,
    readonly defaultCwd: string,
    private readonly log: Log,
  ) {}

  /** A new context with its kernel started; throws when the kernel does not start. */
  async create(language: CodeLanguage, cwd: string): Promise<Context> {
    const kernel = this.makeKernel(language, cwd);
    try {
      await kernel.start();
    } catch (err) {
      await kernel.shutdown();
      throw err;
    }
    const context: Context = { id: randomUUID(), language, cwd, kernel, lock: new Lock(), sandboxEnvApplied: false };
    this.byId.set(context.id, context);
    this.log('info', 'context created', { id: context.id, language, cwd });
    return context;
  }

  get(id: string): Context | undefined {
    return this.byId.get(id);
  }

  /** The language's default context, created once (concurrent first uses share the creation). */
  defaultFor(language: CodeLanguage): Promise<Context> {
    let context = this.defaults.get(language);
    if (!context) {
      context = this.create(language, this.defaultCwd);
      this.defaults.set(language, context);
      context.catch(() => this.defaults.delete(language));
    }
    return context;
  }

  list(): CodeContext[] {
    return [...this.byId.values()].map(({ id, language, cwd }) => ({ id, language, cwd }));
  }

  /** Ends the kernel; a running execution ends as unexpected. A removed default is made again at its next use. */
  async remove(id: string): Promise<boolean> {
    const context = this.byId.get(id);
    if (!context) return false;
    this.byId.delete(id);
    for (const [language, pending] of this.defaults) {
      if ((await pending.catch(() => { /* a default that failed to start is not this context; its caller had the error */ })) === context) this.defaults.delete(language);
    }
    await context.kernel.shutdown();
    this.log('info', 'context removed', { id });
    return true;
  }

  /**
   * A fresh kernel in the same context: variables are gone. It does not wait for a running
   * execution (restarting is how one gets out of a stuck one): that execution ends as unexpected.
   */
  async restart(id: string): Promise<boolean> {
    const context = this.byId.get(id);
    if (!context) return false;
    await context.kernel.restart();
    this.log('info', 'context restarted', { id });
    return true;
  }

  async shutdownAll(): Promise<void> {
    const all = [...this.byId.values()];
    this.byId.clear();
    this.defaults.clear();
    await Promise.all(all.map((c) => c.kernel.shutdown()));
  }
}

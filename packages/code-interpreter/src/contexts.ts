/**
 * The contexts of the service: each a kernel, a working directory and a lock that runs its
 * executions one at a time. A language's default context (the one `/execute` with `language`
 * and no `context_id` uses) is created at its first use; python's when the service starts.
 */
import { randomUUID } from 'node:crypto';
import type { CodeContext, CodeLanguage } from '@svc/contracts/code-interpreter';
import type { Caller } from './access.ts';
import type { Kernel, Log } from './kernel.ts';
import { Lock } from './lock.ts';

/**
 * How many contexts `POST /contexts` may have made at once (the defaults, one a language, are not
 * counted). Each is a process (a Python kernel holds tens of MB), and the route answered anyone
 * without limit: 40 requests made 40 kernels.
 */
export const MAX_CONTEXTS = 32;

export interface Context {
  id: string;
  language: CodeLanguage;
  cwd: string;
  kernel: Kernel;
  lock: Lock;
  /** Whether the sandbox's environment variables from envd have been given to the kernel. */
  sandboxEnvApplied: boolean;
  /** Who made it: `anonymous` for a create without the token in a secured sandbox (context-routes.ts). */
  madeBy: Caller;
  /** A language's default context, made by the service for `/execute`. */
  isDefault: boolean;
}

export type KernelFactory = (language: CodeLanguage, cwd: string) => Kernel;

/** A create past MAX_CONTEXTS: the route answers 429. */
export class TooManyContexts extends Error {
  constructor(readonly limit: number) {
    super(`there are already ${limit} contexts, the most a sandbox may have at once: remove one (DELETE /contexts/{id}) first`);
  }
}

export class Contexts {
  private readonly byId = new Map<string, Context>();
  private readonly defaults = new Map<CodeLanguage, Promise<Context>>();
  /** Contexts made by create(), those still starting included, so that concurrent creates count. */
  private counted = 0;
  /** Kernels still starting, which shutdownAll waits for. */
  private readonly starting = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    private readonly makeKernel: KernelFactory,
    readonly defaultCwd: string,
    private readonly log: Log,
    private readonly maxContexts = MAX_CONTEXTS,
  ) {}

  /**
   * A new context with its kernel started; throws TooManyContexts past the limit, and the
   * kernel's error when it does not start.
   */
  async create(language: CodeLanguage, cwd: string, madeBy: Caller): Promise<Context> {
    if (this.counted >= this.maxContexts) throw new TooManyContexts(this.maxContexts);
    this.counted += 1;
    try {
      return await this.start(language, cwd, madeBy, false);
    } catch (err) {
      this.counted -= 1;
      throw err;
    }
  }

  private start(language: CodeLanguage, cwd: string, madeBy: Caller, isDefault: boolean): Promise<Context> {
    const started = this.startKernel(language, cwd, madeBy, isDefault);
    const settled = started.then(() => undefined, () => { /* only waited for here: the caller of start() gets the error */ });
    this.starting.add(settled);
    void settled.then(() => this.starting.delete(settled));
    return started;
  }

  private async startKernel(language: CodeLanguage, cwd: string, madeBy: Caller, isDefault: boolean): Promise<Context> {
    if (this.closed) throw new Error('the code interpreter is stopping');
    const kernel = this.makeKernel(language, cwd);
    try {
      await kernel.start();
    } catch (err) {
      await kernel.shutdown();
      throw err;
    }
    // A kernel that came up while the service stopped (warmUp, then a stop) would outlive it.
    if (this.closed) {
      await kernel.shutdown();
      throw new Error('the code interpreter is stopping');
    }
    const context: Context = { id: randomUUID(), language, cwd, kernel, lock: new Lock(), sandboxEnvApplied: false, madeBy, isDefault };
    this.byId.set(context.id, context);
    this.log('info', 'context created', { id: context.id, language, cwd, madeBy });
    return context;
  }

  get(id: string): Context | undefined {
    return this.byId.get(id);
  }

  /** The language's default context, created once (concurrent first uses share the creation). */
  defaultFor(language: CodeLanguage): Promise<Context> {
    let context = this.defaults.get(language);
    if (!context) {
      context = this.start(language, this.defaultCwd, 'holder', true);
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
    if (!context.isDefault) this.counted -= 1;
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
    this.closed = true;
    await Promise.all(this.starting);
    const all = [...this.byId.values()];
    this.byId.clear();
    this.counted = 0;
    this.defaults.clear();
    await Promise.all(all.map((c) => c.kernel.shutdown()));
  }
}

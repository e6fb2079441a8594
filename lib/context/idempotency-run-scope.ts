import { AsyncLocalStorage } from 'node:async_hooks';
import type { IdempotencyRun } from '../execution/idempotency-run';
import { runScopeDisableOn } from '../internals/run-scope-disable';

/** What the code running under a claimed record (a handler, an operation's steps) can reach. */
export interface IdempotencyRunScope {
  /** The run that owns the record. */
  readonly run: IdempotencyRun;
  /** The transaction's ORM handle on `transactional: true` routes. */
  manager?: unknown;
  /** Set when a request's handler body starts (after guards, interceptors and pipes). */
  handlerStarted: boolean;
}

/**
 * Carries each live run's scope through the async calls of its handler (or its completer). A run
 * that ended is reached no more, even by code it left running. Where `run-scope-disable` is on,
 * the storage (and Node's async hooks with it) is off while no run is live. Internal.
 */
export class IdempotencyRunScopes {
  private readonly storage = new AsyncLocalStorage<IdempotencyRunScope>();
  /** Weak: a run whose handler never settles does not keep its objects alive. */
  private readonly live = new WeakSet<IdempotencyRunScope>();
  private liveCount = 0;
  private readonly disabling = runScopeDisableOn();

  /** The scope of the run the caller's code belongs to, while that run is live. */
  current(): IdempotencyRunScope | undefined {
    const scope = this.storage.getStore();
    return scope !== undefined && this.live.has(scope) ? scope : undefined;
  }

  /** Whether a run is live: none once every run ended (no run leaks), and so the storage on. */
  get active(): boolean {
    return this.liveCount > 0;
  }

  /**
   * Runs `fn`, and everything it starts, in the run's scope, live until `end(scope)`.
   * @param scope - the run's scope
   * @param fn - the handler's (or the operation's) start
   */
  run<T>(scope: IdempotencyRunScope, fn: () => T): T {
    if (!this.live.has(scope)) {
      this.live.add(scope);
      this.liveCount++;
    }
    return this.storage.run(scope, fn);
  }

  /**
   * Ends a run's scope: its code reaches it no more, wherever it still runs. The last live run's
   * end turns the storage off. Safe to call more than once, or for a scope never run.
   * @param scope - the run's scope
   */
  end(scope: IdempotencyRunScope): void {
    if (this.live.delete(scope) && --this.liveCount === 0 && this.disabling) this.storage.disable();
  }
}

/** The process's run scopes. Internal. */
export const idempotencyRunScopes = new IdempotencyRunScopes();

import { Inject, Injectable } from '@nestjs/common';
import type { OnModuleDestroy } from '@nestjs/common';
import { IDEMPOTENCY_OPTIONS, IDEMPOTENCY_STORE_CAPABILITIES } from '../config/idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import type {
  IdempotencyStoreCapabilities,
  IdempotencyWakeUpListener,
} from '../storage/idempotency-store.capabilities';

/** Why a wait ended: a wake-up (look again), its time ran out, the client left, or shutdown. */
export type WaitEnd = 'woken' | 'timeout' | 'gone' | 'full' | 'closed';

/** The watches of one key on this instance, and the poll timer of those asleep. */
interface WatchedKey {
  readonly watches: Set<KeyWatch>;
  poll?: ReturnType<typeof setInterval>;
}

/**
 * One request's watch over a key it may wait for, from before its claim is sent until it stops
 * waiting. A wake-up that comes while the request is not asleep (its claim is on its way) is
 * kept, so the next `sleep()` returns at once: a record that settles between the claim's
 * answer and the wait is never missed.
 */
export class KeyWatch {
  private woken = false;
  private asleep?: (end: WaitEnd) => void;
  private ended = false;
  /** Whether this request has waited (it counts against `maxWaiters` from then on). */
  waited = false;

  /** @internal Built by `IdempotencyWaiters.watch()`. */
  constructor(
    private readonly waiters: IdempotencyWaiters,
    readonly token: string,
  ) {}

  /**
   * Waits for the key to settle, at most `ms`.
   * @param pollMs - the key's waiters look again this often while wake-ups from other instances
   *   are not pushed
   * @param gone - called with a function that ends the wait, when the client hangs up
   * @returns why the wait ended: `woken` (look again), `timeout`, `gone` (the client left),
   *   `full` (`maxWaiters` requests wait already) or `closed` (shutdown)
   */
  sleep(ms: number, pollMs: number): Promise<WaitEnd> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve('woken');
    }
    if (!this.waited) {
      if (!this.waiters.admit()) return Promise.resolve('full');
      this.waited = true;
    }
    return new Promise<WaitEnd>((resolve) => {
      const timer = setTimeout(() => this.wake('timeout'), ms);
      this.asleep = (end) => {
        clearTimeout(timer);
        this.asleep = undefined;
        resolve(end);
      };
      this.waiters.asleep(this, pollMs);
    });
  }

  /** Whether this watch is asleep now. */
  get sleeping(): boolean {
    return this.asleep !== undefined;
  }

  /** Ends the wait with `end`, or, when not asleep, keeps a wake-up for the next `sleep()`. */
  wake(end: WaitEnd = 'woken'): void {
    if (this.asleep) this.asleep(end);
    else if (end === 'woken') this.woken = true;
  }

  /** Stops watching the key (always call it, once the request stops waiting; again is a no-op). */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.wake('closed');
    this.waiters.unwatch(this);
  }
}

/**
 * The requests of this instance that wait for a key in flight (`wait`, `Prefer: wait=N`), and
 * their wake-ups: records settled on this instance (the local-first store reports them), records
 * settled elsewhere (the store's `wakeUps` ability: PostgreSQL `LISTEN`), and one poll per key
 * every `wait.pollIntervalSeconds` that wakes one of the key's waiters (which wakes the others
 * once the key is no longer in flight). The poll runs even while the store pushes wake-ups: it
 * finds what no notification announces (a completion by the completer or by a route without
 * `wait`, a lease that lapsed because its instance died).
 *
 * At most `maxWaiters` requests wait at once: past it a request is answered 409 at once, so
 * guessed keys cannot pin the server. Nothing runs while nobody waits: the store's listening
 * connection, opened at the first request of a route that may wait, is idle, and poll timers
 * exist only while a key has waiters asleep.
 */
@Injectable()
export class IdempotencyWaiters implements IdempotencyWakeUpListener, OnModuleDestroy {
  private readonly keys = new Map<string, WatchedKey>();
  private waitingCount = 0;
  private closed = false;

  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_STORE_CAPABILITIES)
    private readonly capabilities: IdempotencyStoreCapabilities,
  ) {}

  /** Requests waiting now (asleep, or looking again between two waits). */
  get size(): number {
    return this.waitingCount;
  }

  /** @inheritDoc */
  get waiting(): boolean {
    return this.keys.size > 0;
  }

  /**
   * Makes sure wake-ups from other instances are on their way (the store's listening connection
   * is opened on the first call, and reopened after a failure once its backoff passed). Called
   * by each request of a route that may wait.
   */
  prepare(): void {
    if (!this.closed) this.capabilities.wakeUps?.listen(this);
  }

  /**
   * Starts watching a key before its claim is sent.
   * @param token - `wakeTokenOf(scope, key)`
   */
  watch(token: string): KeyWatch {
    const watch = new KeyWatch(this, token);
    if (this.closed) return watch;
    let key = this.keys.get(token);
    if (!key) this.keys.set(token, (key = { watches: new Set() }));
    key.watches.add(watch);
    return watch;
  }

  /** @inheritDoc */
  settled(token: string): void {
    const key = this.keys.get(token);
    if (key) for (const watch of key.watches) watch.wake();
  }

  /** @inheritDoc */
  missed(): void {
    for (const key of this.keys.values()) for (const watch of key.watches) watch.wake();
  }

  /** Ends every wait (shutdown) and closes the store's listening connection. */
  async onModuleDestroy(): Promise<void> {
    this.closed = true;
    for (const key of this.keys.values()) {
      for (const watch of key.watches) watch.wake('closed');
      if (key.poll) clearInterval(key.poll);
    }
    this.keys.clear();
    await this.capabilities.wakeUps?.close();
  }

  /** @internal A watch about to wait for the first time: whether there is room. */
  admit(): boolean {
    if (this.closed || this.waitingCount >= this.options.maxWaiters) return false;
    this.waitingCount++;
    return true;
  }

  /** @internal A watch fell asleep: its key polls while any of its watches sleeps. */
  asleep(watch: KeyWatch, pollMs: number): void {
    const key = this.keys.get(watch.token);
    if (!key || key.poll) return;
    key.poll = setInterval(() => this.poll(watch.token), pollMs);
    key.poll.unref?.();
  }

  /** @internal */
  unwatch(watch: KeyWatch): void {
    if (watch.waited) this.waitingCount--;
    const key = this.keys.get(watch.token);
    if (!key?.watches.delete(watch) || key.watches.size > 0) return;
    if (key.poll) clearInterval(key.poll);
    this.keys.delete(watch.token);
  }

  /**
   * One poll of a key: one of its waiters looks again (and wakes the others if the key settled);
   * the timer stops once none is asleep.
   */
  private poll(token: string): void {
    const key = this.keys.get(token);
    if (!key) return;
    for (const watch of key.watches) if (watch.sleeping) return watch.wake();
    clearInterval(key.poll);
    key.poll = undefined;
  }
}

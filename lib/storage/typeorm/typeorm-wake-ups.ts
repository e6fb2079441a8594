import { createHash, randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import type {
  IdempotencyStoreWakeUps,
  IdempotencyWakeUpListener,
} from '../idempotency-store.capabilities';
import { hasPoolAccess, poolOf, prepareStatement } from './prepared-statement';
import type { PreparedStatement } from './prepared-statement';
import type { TypeOrmStoreConnection } from './store-connection';
import { notifySql } from './wake-up-statements.sql';

/** The first wait before opening the listening connection again after a failure. */
const FIRST_RETRY_MS = 1_000;
/** The longest wait between two attempts. */
const MAX_RETRY_MS = 30_000;

/** The part of a node-postgres client the listening connection uses. */
interface ListenClient {
  connect(): Promise<void>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
  on(
    event: 'notification',
    listener: (message: { channel: string; payload?: string }) => void,
  ): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
}

/**
 * The channel a record table's settlements are announced on: one per table (and database), its
 * name a hash so that any table name, schema-qualified or not, makes a plain identifier.
 * @param tableName - the record table, as configured
 */
export function wakeUpChannelOf(tableName: string): string {
  return `nest_idempotency_${createHash('sha256').update(tableName).digest('hex').slice(0, 16)}`;
}

/**
 * Wake-ups over PostgreSQL `LISTEN/NOTIFY`. Writes of routes that may wait send
 * `pg_notify(channel, wakeTokenOf(scope, key))` in the statement that settles the record (so a
 * transactional completion announces at its commit, and a route without `wait` sends nothing);
 * every instance listens on one dedicated connection of its own, outside the DataSource's pool.
 *
 * - The connection is opened at the first `listen()` (the first request of a route that may
 *   wait), with the pool's own connection settings.
 * - A self-test checks that a notification sent through the pool reaches it: behind PgBouncer
 *   in transaction pooling mode it never does (the `LISTEN` lands on a server connection other
 *   clients share), so the store says it cannot push and waiters poll, for good.
 * - When the connection fails it is logged once, waiters poll, and it is opened again by the
 *   next `listen()` once a backoff (1 s, doubling to 30 s) has passed: no timer runs in the
 *   background. Once listening again, every waiter looks again (notifications sent meanwhile
 *   were lost).
 * - `close()` (at shutdown) ends it.
 */
export class TypeOrmWakeUps implements IdempotencyStoreWakeUps {
  private readonly logger = new Logger('Idempotency');
  private readonly notify: PreparedStatement;
  private state: 'idle' | 'connecting' | 'listening' | 'down' | 'polling' | 'closed' = 'idle';
  private listener?: IdempotencyWakeUpListener;
  private client?: ListenClient;
  private failures = 0;
  private retryAt = 0;
  private failureLogged = false;
  private probe?: { payload: string; arrived: () => void };

  /**
   * @param connection - the store: its pool (for the self-test's notification) and timeout
   * @param dataSource - the store's DataSource, once initialised
   * @param channel - `wakeUpChannelOf(tableName)`
   */
  constructor(
    private readonly connection: TypeOrmStoreConnection,
    private readonly dataSource: () => DataSource,
    readonly channel: string,
  ) {
    this.notify = prepareStatement(notifySql(channel));
  }

  /**
   * Where the listening connection stands: not opened yet, opening (and self-testing),
   * listening, down until its backoff passed, given up for polling, or closed.
   */
  get status(): 'idle' | 'connecting' | 'listening' | 'down' | 'polling' | 'closed' {
    return this.state;
  }

  /** @inheritDoc */
  get pushing(): boolean {
    return this.state === 'listening';
  }

  /** @inheritDoc */
  listen(listener: IdempotencyWakeUpListener): void {
    this.listener = listener;
    if (this.state === 'idle' || (this.state === 'down' && Date.now() >= this.retryAt)) {
      void this.open();
    }
  }

  /** @inheritDoc */
  async close(): Promise<void> {
    this.state = 'closed';
    this.probe = undefined;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async open(): Promise<void> {
    this.state = 'connecting';
    let client: ListenClient | undefined;
    try {
      client = listenClientOf(this.dataSource());
      if (!client) {
        return this.poll(
          "the DataSource's driver lends no node-postgres pool to copy the connection settings from",
        );
      }
      this.client = client;
      const opened = client;
      opened.on('error', (error) => this.lost(opened, error));
      opened.on('end', () => this.lost(opened));
      opened.on('notification', (message) => this.notified(message));
      await this.bounded(opened.connect(), 'connecting');
      await this.bounded(opened.query(`LISTEN ${this.channel}`), 'LISTEN');
      if (!(await this.selfTest())) {
        this.client = undefined;
        // Best effort: where connections share a session, the LISTEN would outlive this one.
        await this.bounded(opened.query(`UNLISTEN ${this.channel}`), 'UNLISTEN').catch(() => 0);
        await opened.end().catch(() => undefined);
        return this.poll(
          'a notification sent through the pool did not reach the listening connection ' +
            '(PgBouncer in transaction pooling mode, or a server such as PGlite that shares ' +
            'one session between connections?)',
        );
      }
      if (this.state !== 'connecting') return;
      this.state = 'listening';
      this.failures = 0;
      if (this.failureLogged) this.logger.log('Wake-ups: listening again');
      this.failureLogged = false;
      // Settlements announced while nobody listened were lost: every waiter looks again.
      this.listener?.missed();
    } catch (error) {
      if (client) this.lost(client, error as Error);
      else this.failed(error as Error);
    }
  }

  /**
   * Sends a notification through the pool and waits (up to the store's timeout) for it on the
   * listening connection.
   */
  private async selfTest(): Promise<boolean> {
    const payload = `probe:${randomUUID()}`;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arrived = new Promise<boolean>((resolve) => {
      this.probe = { payload, arrived: () => resolve(true) };
      timer = setTimeout(() => resolve(false), this.connection.timeoutMs);
    });
    try {
      await this.connection.run('wake-up self-test', this.notify, [payload]);
      return await arrived;
    } finally {
      clearTimeout(timer);
      this.probe = undefined;
    }
  }

  private notified(message: { channel: string; payload?: string }): void {
    if (message.channel !== this.channel || !message.payload) return;
    if (message.payload === this.probe?.payload) this.probe.arrived();
    else if (this.state === 'listening') this.listener?.settled(message.payload);
  }

  /** The listening connection failed or ended: waiters poll until it is open again. */
  private lost(client: ListenClient, error?: Error): void {
    if (client !== this.client) return;
    this.client = undefined;
    client.end().catch(() => undefined);
    this.failed(error);
  }

  private failed(error?: Error): void {
    if (this.state === 'closed' || this.state === 'polling') return;
    this.state = 'down';
    this.failures++;
    const backoff = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (this.failures - 1));
    this.retryAt = Date.now() + backoff * (0.75 + Math.random() / 2);
    if (this.failureLogged) return;
    this.failureLogged = true;
    this.logger.warn(
      `Wake-ups: the listening connection failed (${error?.message ?? 'it ended'}); waiters ` +
        'poll until it is open again',
    );
  }

  /** No pushed wake-ups here, for good: said once, and waiters poll. */
  private poll(why: string): void {
    if (this.state === 'closed') return;
    this.state = 'polling';
    this.logger.log(`Wake-ups: ${why}; waiters poll (wait.pollIntervalSeconds)`);
  }

  /** `step`, or a timeout error once the store's timeout passed. */
  private bounded<T>(step: Promise<T>, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${what} took longer than ${this.connection.timeoutMs} ms`)),
        this.connection.timeoutMs,
      );
      step.finally(() => clearTimeout(timer)).then(resolve, reject);
    });
  }
}

/**
 * A new node-postgres client with the settings of the DataSource's pool (its URL or host,
 * credentials, TLS, application name), kept alive by TCP keep-alives, or `undefined` when the
 * driver lends no such pool.
 */
function listenClientOf(dataSource: DataSource): ListenClient | undefined {
  if (!hasPoolAccess(dataSource)) return undefined;
  const pool = poolOf(dataSource) as { Client?: unknown; options?: any } | undefined;
  if (typeof pool?.Client !== 'function' || typeof pool.options !== 'object') return undefined;
  const Client = pool.Client as new (options: object) => ListenClient;
  // The pool keeps the password as a non-enumerable property: copied by name.
  return new Client({ ...pool.options, password: pool.options.password, keepAlive: true });
}

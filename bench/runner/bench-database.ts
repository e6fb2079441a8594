import { Client } from 'pg';

/** `application_name` of the runner's listening connection (left out of `listeningSessions()`). */
const RUNNER_LISTENER = 'nest-idempotency-bench-listener';

/** The runner's own `LISTEN` on a channel: when each payload first arrived. */
export interface BenchListener {
  /** `performance.now()` at the first arrival of each payload. */
  readonly arrivals: Map<string, number>;
  close(): Promise<void>;
}

/** The tables the bench app writes; emptied between phases so every phase starts alike. */
const BENCH_TABLES = [
  'bench_entries',
  'bench_provider_charges',
  'idempotency_records',
  'bench_lean_records',
  'bench_durable_keys',
];

/** How many sessions of the server's pool are in each state, from `pg_stat_activity`. */
export interface SessionStates {
  /** `idle in transaction`: a transaction open, no statement running. */
  idleInTransaction: number;
  /**
   * How long the longest `idle in transaction` session has been so (since its last statement
   * ended), in milliseconds; 0 when there is none.
   */
  longestIdleInTransactionMs: number;
  /** `active`: a statement running. */
  active: number;
  /** Every session on the bench database but the runner's. */
  total: number;
}

/**
 * The runner's own connection to the bench database: creates it, empties it between phases,
 * counts handler executions and seeds expired records for the purge.
 */
export class BenchDatabase {
  private constructor(
    /** Connection string of the bench database (what the server gets as `DATABASE_URL`). */
    readonly url: string,
    private readonly client: Client,
  ) {}

  /**
   * Creates the database when missing and connects to it. Its tables are created by the
   * server's migrations, so call `reset()` only once a server has started.
   *
   * @param serverUrl - any database on the PostgreSQL server
   * @param name - the bench database (validated as a plain identifier)
   */
  static async open(serverUrl: string, name: string): Promise<BenchDatabase> {
    const admin = new Client({ connectionString: serverUrl });
    await admin.connect();
    try {
      const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [
        name,
      ]);
      if (!rowCount) await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    const url = new URL(serverUrl);
    url.pathname = `/${name}`;
    const client = new Client({ connectionString: url.toString() });
    await client.connect();
    return new BenchDatabase(url.toString(), client);
  }

  /**
   * Empties the bench tables. Call once the load has stopped: a request autocannon gave up on at
   * the end of a run may still be in a transaction, and a TRUNCATE that deadlocks with it (the
   * transactional floor locks the record table before `bench_entries`) is tried again.
   */
  async reset(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.client.query(`TRUNCATE ${BENCH_TABLES.join(', ')} RESTART IDENTITY`);
        return;
      } catch (error) {
        if ((error as { code?: string }).code !== '40P01' || attempt >= 5) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  }

  /** Rows in `bench_entries`: one per handler execution since the last reset. */
  async countEntries(): Promise<number> {
    const { rows } = await this.client.query('SELECT count(*)::int AS n FROM bench_entries');
    return rows[0].n;
  }

  /** Rows in `bench_provider_charges`: charges the fake provider made since the last reset. */
  async countCharges(): Promise<number> {
    const { rows } = await this.client.query(
      'SELECT count(*)::int AS n FROM bench_provider_charges',
    );
    return rows[0].n;
  }

  /**
   * The states of the other sessions on the bench database (the server's pool), now: each call
   * is its own transaction, so `pg_stat_activity` is read afresh.
   */
  async sessionStates(): Promise<SessionStates> {
    const { rows } = await this.client.query(
      `SELECT count(*) FILTER (WHERE state = 'idle in transaction')::int AS "idleInTransaction",
              COALESCE(1000 * EXTRACT(epoch FROM max(clock_timestamp() - state_change)
                FILTER (WHERE state = 'idle in transaction')), 0)::float8 AS "longestIdleInTransactionMs",
              count(*) FILTER (WHERE state = 'active')::int AS active,
              count(*)::int AS total
         FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    return rows[0];
  }

  /**
   * The id of the encryption key that sealed the record of `key`, or null when it is stored in
   * the clear (see the encryption phase).
   */
  async recordSealedWith(key: string): Promise<string | null> {
    const { rows } = await this.client.query(
      `SELECT response_headers->>'x-nest-idempotency-sealed' AS id
         FROM idempotency_records WHERE idempotency_key = $1`,
      [key],
    );
    return rows[0]?.id ?? null;
  }

  /** Rows in `bench_entries` whose `note` is `note`: the wait storm's executions of one key. */
  async countEntriesNoted(note: string): Promise<number> {
    const { rows } = await this.client.query(
      'SELECT count(*)::int AS n FROM bench_entries WHERE note = $1',
      [note],
    );
    return rows[0].n;
  }

  /**
   * The record of `key`: its status, and when it was last written (`updated_at`, which the
   * completion sets to `clock_timestamp()` in its own statement, just before its commit), in
   * epoch milliseconds with microseconds; `undefined` when there is no record.
   */
  async record(key: string): Promise<{ status: string; updatedAtMs: number } | undefined> {
    const { rows } = await this.client.query(
      `SELECT status, (EXTRACT(EPOCH FROM updated_at) * 1000)::float8 AS "updatedAtMs"
         FROM idempotency_records WHERE idempotency_key = $1`,
      [key],
    );
    return rows[0];
  }

  /**
   * Sessions on the bench database whose last statement was a `LISTEN` on the library's wake-up
   * channel: the listening connections of the servers' stores, one per store that listens.
   */
  async listeningSessions(): Promise<number> {
    const { rows } = await this.client.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()
          AND application_name <> '${RUNNER_LISTENER}'
          AND query LIKE 'LISTEN nest\\_idempotency\\_%'`,
    );
    return rows[0].n;
  }

  /**
   * Opens a connection of the runner's own that listens on `channel` and notes when each payload
   * first arrives: a notification is delivered once its transaction has committed, so its
   * arrival is when a listening connection can learn of the commit.
   */
  async listen(channel: string): Promise<BenchListener> {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel))
      throw new Error(`not a plain channel name: ${channel}`);
    const client = new Client({ connectionString: this.url, application_name: RUNNER_LISTENER });
    const arrivals = new Map<string, number>();
    client.on('notification', (message) => {
      const at = performance.now();
      if (message.payload !== undefined && !arrivals.has(message.payload)) {
        arrivals.set(message.payload, at);
      }
    });
    await client.connect();
    await client.query(`LISTEN ${channel}`);
    return { arrivals, close: () => client.end() };
  }

  /**
   * PostgreSQL's clock (`clock_timestamp()`) minus this process's
   * (`performance.timeOrigin + performance.now()`), in milliseconds, read in the middle of a
   * round trip: the best of `samples` reads (the shortest round trip), with half of that round
   * trip as its uncertainty.
   */
  async clockOffset(samples = 20): Promise<{ offsetMs: number; uncertaintyMs: number }> {
    let best = { offsetMs: 0, uncertaintyMs: Infinity };
    for (let i = 0; i < samples; i++) {
      const before = performance.now();
      const { rows } = await this.client.query(
        'SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::float8 AS ms',
      );
      const after = performance.now();
      const uncertaintyMs = (after - before) / 2;
      if (uncertaintyMs < best.uncertaintyMs) {
        best = {
          offsetMs: rows[0].ms - (performance.timeOrigin + before + uncertaintyMs),
          uncertaintyMs,
        };
      }
    }
    return best;
  }

  /** Rows in the idempotency record table. */
  async countRecords(): Promise<number> {
    const { rows } = await this.client.query('SELECT count(*)::int AS n FROM idempotency_records');
    return rows[0].n;
  }

  /**
   * Bulk-inserts completed records that expired an hour ago, in one `INSERT … SELECT
   * generate_series`, then vacuums and analyses the table, as autovacuum would have done to a
   * backlog that built up over time.
   *
   * @param count - how many records
   * @returns milliseconds spent inserting and vacuuming
   */
  async seedExpiredRecords(count: number): Promise<{ insertMs: number; vacuumMs: number }> {
    const started = performance.now();
    await this.client.query(
      `INSERT INTO idempotency_records (scope, idempotency_key, record_id, fingerprint, status,
         owner_token, locked_until, expires_at, purge_after, attempts, method, path,
         response_status, response_headers, response_body, created_at, updated_at)
       SELECT '', 'expired-' || g, gen_random_uuid(), encode(sha256(g::text::bytea), 'hex'),
         'completed', NULL, NULL, now() - interval '1 hour' - g * interval '1 millisecond',
         now() - interval '1 hour' - g * interval '1 millisecond', 1,
         'POST', '/idempotent', 201,
         '{"content-type": "application/json; charset=utf-8"}'::jsonb,
         convert_to('{"id":' || g || ',"amount":100,"note":null,"createdAt":"2026-01-01T00:00:00.000Z"}', 'UTF8'),
         now() - interval '25 hours', now() - interval '25 hours'
       FROM generate_series(1, $1::int) g`,
      [count],
    );
    const inserted = performance.now();
    await this.client.query('VACUUM (ANALYZE) idempotency_records');
    return { insertMs: inserted - started, vacuumMs: performance.now() - inserted };
  }

  /** Records whose replay window is over (what a purge deletes). */
  async countExpiredRecords(): Promise<number> {
    const { rows } = await this.client.query(
      'SELECT count(*)::int AS n FROM idempotency_records WHERE expires_at <= now()',
    );
    return rows[0].n;
  }

  /** Process ids of the other sessions on the bench database (the server's pool). */
  async backendPids(): Promise<number[]> {
    const { rows } = await this.client.query(
      `SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    return rows.map((row) => row.pid);
  }

  /** `server_version` of PostgreSQL. */
  async serverVersion(): Promise<string> {
    const { rows } = await this.client.query('SHOW server_version');
    return rows[0].server_version;
  }

  /** Closes the connection. */
  async close(): Promise<void> {
    await this.client.end();
  }
}

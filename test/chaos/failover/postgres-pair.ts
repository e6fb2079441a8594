import { execFile } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
} from 'node:fs';
import { appendFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';

const run = promisify(execFile);

/** How the replica follows the primary. */
export type Replication = 'async' | 'sync';

/** The newest PostgreSQL server binaries of a Debian-style install, or `PG_BINDIR`. */
function binDir(): string {
  if (process.env.PG_BINDIR) return process.env.PG_BINDIR;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  const found = versions
    .map((v) => join(root, v, 'bin'))
    .find((dir) => existsSync(join(dir, 'initdb')));
  if (!found) throw new Error('PostgreSQL server binaries not found: set PG_BINDIR');
  return found;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Runs a server binary, as the `postgres` user when this process is root (PostgreSQL refuses root). */
async function pg(tool: string, args: string[]): Promise<string> {
  const path = join(binDir(), tool);
  const asRoot = process.getuid?.() === 0;
  const { stdout } = asRoot
    ? await run('runuser', ['-u', 'postgres', '--', path, ...args])
    : await run(path, args);
  return stdout;
}

type Node = 'primary' | 'replica';

/**
 * Two throwaway PostgreSQL servers of their own, on their own ports, under one temporary folder: a
 * primary and a streaming replica made with `pg_basebackup -R`. It never touches the machine's
 * clusters. After a failover, `rebuildStandby()` makes the promoted replica the primary and clones
 * a new replica from it, so a run can fail over again. `remove()` stops both and deletes the
 * folder; call it from a `finally` and an interrupt handler, since servers outlive the process that
 * started them.
 */
export class PostgresPair {
  /** Each node's data folder and port: `rebuildStandby()` moves them. */
  private readonly nodes: Record<Node, { dir: string; port: number }>;
  private clones = 0;
  /** The node that takes writes: the replica from a failover until `rebuildStandby()`. */
  current: Node = 'primary';

  private constructor(
    readonly folder: string,
    primaryPort: number,
    replicaPort: number,
    readonly replication: Replication,
  ) {
    this.nodes = {
      primary: { dir: join(folder, 'primary'), port: primaryPort },
      replica: { dir: join(folder, 'replica'), port: replicaPort },
    };
  }

  static async create(replication: Replication): Promise<PostgresPair> {
    const folder = mkdtempSync(join(tmpdir(), 'idempotency-failover-'));
    chmodSync(folder, 0o755);
    if (process.getuid?.() === 0) {
      const { uid, gid } = statSync('/var/lib/postgresql');
      chownSync(folder, uid, gid);
    }
    const pair = new PostgresPair(folder, await freePort(), await freePort(), replication);
    try {
      await pair.initPrimary();
      await pair.cloneReplica();
    } catch (error) {
      await pair.remove();
      throw error;
    }
    return pair;
  }

  get primaryPort(): number {
    return this.nodes.primary.port;
  }

  get replicaPort(): number {
    return this.nodes.replica.port;
  }

  private dir(name: Node): string {
    return this.nodes[name].dir;
  }

  private async initPrimary(): Promise<void> {
    await pg('initdb', ['-D', this.dir('primary'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
    const settings = [
      `port = ${this.primaryPort}`,
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${this.folder}'`,
      'fsync = off',
      'max_connections = 60',
      this.replication === 'sync' ? "synchronous_standby_names = '*'" : '',
    ];
    await appendFile(join(this.dir('primary'), 'postgresql.auto.conf'), settings.join('\n') + '\n');
    await this.start('primary');
  }

  private async cloneReplica(): Promise<void> {
    const source = ['-h', '127.0.0.1', '-p', String(this.primaryPort), '-U', 'postgres'];
    await pg('pg_basebackup', [...source, '-D', this.dir('replica'), '-R', '-X', 'stream']);
    // Promoted, it has no standby of its own: it must not wait for one (what it copied says to).
    const own = [`port = ${this.replicaPort}`, "synchronous_standby_names = ''"];
    await appendFile(join(this.dir('replica'), 'postgresql.auto.conf'), own.join('\n') + '\n');
    await this.start('replica');
  }

  /** Starts one server and waits until it accepts connections. */
  async start(name: Node): Promise<void> {
    const log = `${this.dir(name)}.log`;
    await pg('pg_ctl', ['-D', this.dir(name), '-l', log, '-w', '-t', '30', 'start']);
  }

  /** Stops one server: `immediate` is a crash (no checkpoint, clients cut off). */
  async stop(name: Node, mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await pg('pg_ctl', ['-D', this.dir(name), '-m', mode, '-w', 'stop']).catch(() => undefined);
  }

  /** Promotes the replica to a primary that takes writes. */
  async promote(): Promise<void> {
    await pg('pg_ctl', ['-D', this.dir('replica'), '-w', 'promote']);
  }

  /**
   * The failover: the primary stops hard, the replica (started first if it was stopped, so it has
   * only what it received before) is promoted in its place.
   */
  async failOver(): Promise<void> {
    await this.stop('primary', 'immediate');
    if (!(await this.running('replica'))) await this.start('replica');
    await this.promote();
    this.current = 'replica';
  }

  async running(name: Node): Promise<boolean> {
    return pg('pg_ctl', ['-D', this.dir(name), 'status']).then(
      () => true,
      () => false,
    );
  }

  url(name: Node, database = 'postgres'): string {
    const port = this.nodes[name].port;
    return `postgres://postgres@127.0.0.1:${port}/${database}`;
  }

  /**
   * After `failOver()`: the promoted replica becomes the primary, and a new replica is cloned from
   * it (`pg_basebackup -R`), started, and caught up. With synchronous replication the primary then
   * waits for it again (until then its commits were not replicated: fail over only after this).
   */
  async rebuildStandby(): Promise<void> {
    await this.stop('primary', 'immediate');
    rmSync(this.dir('primary'), { recursive: true, force: true });
    this.nodes.primary = this.nodes.replica;
    this.current = 'primary';
    this.nodes.replica = {
      dir: join(this.folder, `clone-${++this.clones}`),
      port: await freePort(),
    };
    await this.cloneReplica();
    await this.waitForReplica();
    if (this.replication === 'sync') {
      const conf = join(this.dir('primary'), 'postgresql.auto.conf');
      await appendFile(conf, "synchronous_standby_names = '*'\n");
      await query(this.url('primary'), 'SELECT pg_reload_conf()');
      await this.waitFor(
        "SELECT count(*) > 0 AS ok FROM pg_stat_replication WHERE sync_state = 'sync'",
      );
    }
  }

  /** Polls `sql` (one row, `ok`) on the primary until it is true. */
  private async waitFor(sql: string, timeoutMs = 15_000): Promise<void> {
    for (const endsAt = Date.now() + timeoutMs; Date.now() < endsAt;) {
      if ((await query(this.url('primary'), sql))[0].ok) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`timed out waiting for: ${sql}`);
  }

  /** Waits until the replica has replayed everything the primary has written so far. */
  async waitForReplica(timeoutMs = 15_000): Promise<void> {
    const lsn = await query(this.url('primary'), 'SELECT pg_current_wal_lsn()::text AS lsn');
    const endsAt = Date.now() + timeoutMs;
    while (Date.now() < endsAt) {
      const caught = await query(
        this.url('replica'),
        `SELECT pg_last_wal_replay_lsn() >= '${lsn[0].lsn}'::pg_lsn AS caught`,
      );
      if (caught[0].caught) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`the replica did not replay ${lsn[0].lsn} within ${timeoutMs} ms`);
  }

  /** Stops both servers and deletes their folder. */
  async remove(): Promise<void> {
    await this.stop('replica', 'immediate');
    await this.stop('primary', 'immediate');
    rmSync(this.folder, { recursive: true, force: true });
  }
}

/** One query on a fresh connection. */
export async function query<T = any>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { BENCH_READY_LINE as READY_LINE } from '../app/bench-app.config';
import type { BenchHttpAdapter } from '../app/bench-app.config';

/** How the runner starts one bench server. */
export interface ServerSpawnOptions {
  adapter: BenchHttpAdapter;
  /** `DATABASE_URL` of the server. */
  databaseUrl: string;
  /** Redis of the peer; `undefined` runs without the peer route. */
  redisUrl: string | undefined;
  poolSize: number;
  /** Prefix of the peer's Redis keys, unique per run. */
  peerKeyPrefix: string;
  /** File that receives the server's stdout and stderr. */
  logFile: string;
  /** Milliseconds to wait for the ready line. */
  startTimeoutMs?: number;
  /**
   * Directory whose compiled `dist/bench/serve.js` runs: this checkout by default, an exported
   * earlier commit for `--baseline`.
   */
  root?: string;
  /**
   * A command the server runs under, before node (`--instructions`: valgrind's callgrind);
   * none by default.
   */
  wrapper?: readonly string[];
  /** Variables added to the server's environment (`--plain`: `NEST_IDEMPOTENCY_PLAIN`). */
  env?: Record<string, string>;
  /**
   * Milliseconds `stop()` waits after SIGTERM before SIGKILL (default 5 s). Under callgrind the
   * server writes its profile as it exits, which takes longer on a loaded host: killed sooner,
   * the file is cut short.
   */
  stopGraceMs?: number;
}

/** The address every bench server listens on (also its `HOST`, which vgdb names pipes after). */
export const BENCH_HOST = '127.0.0.1';

/** A running bench server: a child process of the runner. */
export interface BenchServer {
  adapter: BenchHttpAdapter;
  pid: number;
  /** `http://127.0.0.1:<port>` */
  url: string;
  peer: boolean;
  logFile: string;
  /** Resident set size of the server process, from `/proc/<pid>/status` (VmRSS), in bytes. */
  rssBytes(): Promise<number>;
  /** Stops the server (SIGTERM, then SIGKILL after `stopGraceMs`). */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Kills every server still running: on exit, so a failed or interrupted run leaves none. */
export function killAllServers(): void {
  for (const child of live) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  live.clear();
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', killAllServers);
}

/**
 * Starts the compiled `bench/serve.ts` (`dist/bench/serve.js`, built by the runner first) in a
 * child process (node with `--expose-gc`, so `GET /health?gc=1` can collect before a memory
 * sample), on a free port, and resolves once it printed its ready line.
 *
 * @throws Error with the tail of the server log when it exits or does not get ready in time
 */
export async function startBenchServer(options: ServerSpawnOptions): Promise<BenchServer> {
  installExitHook();
  const root = options.root ?? resolve(__dirname, '..', '..');
  mkdirSync(dirname(options.logFile), { recursive: true });
  const log = createWriteStream(options.logFile);
  const [command, ...args] = [
    ...(options.wrapper ?? []),
    process.execPath,
    '--expose-gc',
    'dist/bench/serve.js',
  ];
  const child = spawn(command, args, {
    cwd: root,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      PORT: '0',
      HOST: BENCH_HOST,
      HTTP_ADAPTER: options.adapter,
      DATABASE_URL: options.databaseUrl,
      REDIS_URL: options.redisUrl ?? 'off',
      BENCH_POOL_SIZE: String(options.poolSize),
      PEER_KEY_PREFIX: options.peerKeyPrefix,
      NO_COLOR: '1',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.stderr!.pipe(log);
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  exited.then(() => live.delete(child));

  const ready = await new Promise<{ port: number; peer: boolean }>((resolveReady, reject) => {
    let buffer = '';
    const timer = setTimeout(
      () => fail(new Error(`no ready line within ${options.startTimeoutMs ?? 60_000} ms`)),
      options.startTimeoutMs ?? 60_000,
    );
    const onData = (chunk: Buffer) => {
      log.write(chunk);
      buffer += chunk.toString('utf8');
      const line = buffer.split('\n').find((candidate) => candidate.startsWith(READY_LINE));
      if (!line) return;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      child.stdout!.pipe(log);
      child.off('exit', onExit);
      resolveReady(JSON.parse(line.slice(READY_LINE.length)));
    };
    const onExit = (code: number | null) =>
      fail(new Error(`the ${options.adapter} server exited (code ${code}) before it was ready`));
    const fail = (error: Error) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      readFile(options.logFile, 'utf8')
        .catch(() => '')
        .then((text) => {
          const tail = text.split('\n').slice(-30).join('\n');
          reject(new Error(`${error.message}; server log ${options.logFile}:\n${tail}`));
        });
    };
    child.stdout!.on('data', onData);
    child.once('exit', onExit);
  });

  return {
    adapter: options.adapter,
    pid: child.pid!,
    url: `http://${BENCH_HOST}:${ready.port}`,
    peer: ready.peer,
    logFile: options.logFile,
    rssBytes: async () => {
      const status = await readFile(`/proc/${child.pid}/status`, 'utf8');
      const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
      if (!match) throw new Error(`no VmRSS in /proc/${child.pid}/status`);
      return Number(match[1]) * 1024;
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), options.stopGraceMs ?? 5000);
      await exited;
      clearTimeout(killer);
      log.end();
    },
  };
}

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { BenchHttpAdapter } from './app/bench-app.config';
import type { BaselineBuild } from './runner/baseline-build';
import { buildBaseline, plainBaseline, removeBaseline } from './runner/baseline-build';
import { BenchDatabase } from './runner/bench-database';
import type { BenchOptions, BenchPhase } from './runner/bench-options';
import { parseBenchOptions } from './runner/bench-options';
import type { AdapterResult, BenchResults } from './runner/bench-results';
import { machineInfo } from './runner/machine-info';
import { runBaselinePhase } from './runner/phases/baseline.phase';
import { runEncryptionPhase } from './runner/phases/encryption.phase';
import { runInstructionsPhase } from './runner/phases/instructions.phase';
import type { CountedBuild } from './runner/phases/instructions.phase';
import { callgrindAvailable, callgrindCommand } from './runner/instruction-count';
import { runLatencyProbe } from './runner/phases/latency-probe.phase';
import { runLeakCheck } from './runner/phases/leak.phase';
import { runPromisesPhase } from './runner/phases/promises.phase';
import { runPhasedPhase } from './runner/phases/phased.phase';
import { runPurgePhase } from './runner/phases/purge.phase';
import { combineStormRounds, runStorm } from './runner/phases/storm.phase';
import type { StormResult } from './runner/phases/storm.phase';
import { runThroughputPhase } from './runner/phases/throughput.phase';
import { runWaitStormPhase } from './runner/phases/wait-storm.phase';
import { ROUTES } from './runner/phases/bench-routes';
import { redisAnswers } from './runner/redis-ping';
import { CHART_FILE, isFullRun, writeResultsChart } from './results-chart';
import { formatAdapterReport, formatSummary } from './runner/report';
import { withPhaseServers } from './runner/phase-servers';
import { killAllServers, startBenchServer } from './runner/server-process';
import type { BenchServer, ServerSpawnOptions } from './runner/server-process';
import { evaluateTargets } from './runner/targets';

const ROOT = resolve(__dirname, '..');

/** Progress goes to stderr; the tables go to stdout. */
function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/**
 * Compiles the library and the bench app to `dist/` (`tsconfig.build.json`). The server runs
 * the compiled code rather than through ts-node, whose loader pulls in Node's `domain` module:
 * once loaded, every EventEmitter construction and emit in the process pays for domain checks,
 * a cost no compiled application has (about 10–14 µs per request in a profile).
 */
function buildBenchApp(): void {
  execFileSync(
    process.execPath,
    [resolve(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
}

/** Seconds since `since`, for progress lines. */
const elapsed = (since: number) => `${((performance.now() - since) / 1000).toFixed(0)} s`;

async function benchAdapter(
  adapter: BenchHttpAdapter,
  db: BenchDatabase,
  options: BenchOptions,
  redisUrl: string | undefined,
  runId: string,
): Promise<AdapterResult> {
  const started = performance.now();
  log(`[${adapter}] starting the server`);
  const server = await startBenchServer({
    adapter,
    databaseUrl: db.url,
    redisUrl,
    poolSize: options.poolSize,
    peerKeyPrefix: `nest-idempotency-bench:${runId}:${adapter}`,
    logFile: resolve(ROOT, 'bench/results/logs', `server-${adapter}.log`),
  });
  try {
    log(`[${adapter}] pid ${server.pid} on ${server.url}`);
    const result: AdapterResult = { adapter, peer: server.peer, targets: [], seconds: 0 };
    const runs = (phase: BenchPhase) => options.phases.includes(phase);
    if (runs('throughput')) {
      log(`[${adapter}] throughput (at ${elapsed(started)})`);
      result.throughput = await runThroughputPhase(server, db, options, server.peer, log);
    }
    if (runs('probe')) {
      log(`[${adapter}] unloaded latency probe (at ${elapsed(started)})`);
      result.probe = await runLatencyProbe(server, db, options.probeRequests, server.peer);
    }
    if (runs('storm')) {
      log(
        `[${adapter}] same-key storms, ${options.rounds} interleaved round(s) (at ${elapsed(started)})`,
      );
      // The floor first in every round: the same storm answered 409 by a bare route (no database);
      // then the same 409s thrown from a bare interceptor, what any interceptor-based layer pays.
      const paths = [
        ROUTES.stormFloor,
        ROUTES.stormFloorInterceptor,
        ROUTES.idempotent,
        ROUTES.idempotentTx,
        ROUTES.durable,
        ...(server.peer ? [ROUTES.peer] : []),
      ];
      const rounds: StormResult[][] = [];
      for (let round = 1; round <= options.rounds; round++) {
        const storms: StormResult[] = [];
        for (const path of paths) {
          const storm = await runStorm(server, db, path, options.stormRequests);
          log(
            `  ${adapter} storm ${path} (round ${round}): ${storm.executions} execution(s), ` +
              `${JSON.stringify(storm.statuses)}, p99 ${storm.latency.p99.toFixed(2)} ms`,
          );
          storms.push(storm);
        }
        rounds.push(storms);
      }
      result.storms = combineStormRounds(rounds, ROUTES.stormFloor);
    }
    if (runs('purge')) {
      log(`[${adapter}] purge of ${options.purgeRows} expired records (at ${elapsed(started)})`);
      result.purge = await runPurgePhase(
        server,
        db,
        {
          rows: options.purgeRows,
          connections: options.connections,
          durationSeconds: options.durationSeconds,
          warmupSeconds: options.warmupSeconds,
        },
        log,
      );
    }
    if (runs('leak')) {
      log(`[${adapter}] memory over ${options.leakRequests} requests (at ${elapsed(started)})`);
      const leak = await runLeakCheck(server, db, options.leakRequests, options.connections);
      const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
      log(
        `  ${adapter} RSS ${mib(leak.samples[0].rssBytes)} → ` +
          `${mib(leak.samples[leak.samples.length - 1].rssBytes)} MB at ${leak.rps.toFixed(0)} req/s`,
      );
      result.leak = leak;
    }
    if (runs('phased')) {
      log(
        `[${adapter}] phased vs transactional payments, provider ${options.providerLatenciesMs.join(', ')} ms ` +
          `(at ${elapsed(started)})`,
      );
      result.phased = await runPhasedPhase(
        server,
        db,
        {
          connections: options.connections,
          durationSeconds: options.durationSeconds,
          warmupSeconds: options.warmupSeconds,
          rounds: options.rounds,
          providerLatenciesMs: options.providerLatenciesMs,
          poolSize: options.poolSize,
        },
        log,
      );
    }
    // The encryption and wait-storm phases compare idempotency configurations: each runs on
    // servers of its own (an application has one configuration), on the same database.
    const phaseServers = {
      adapter,
      databaseUrl: db.url,
      redisUrl: undefined,
      poolSize: options.poolSize,
      peerKeyPrefix: `nest-idempotency-bench:${runId}:${adapter}`,
      logDir: resolve(ROOT, 'bench/results/logs'),
    };
    if (runs('encryption')) {
      log(
        `[${adapter}] encryption at rest, 1 KB and 64 KB bodies, on a clear and a sealed server ` +
          `(at ${elapsed(started)})`,
      );
      const specs = [
        { name: 'clear', idempotency: 'clear' },
        { name: 'sealed', idempotency: 'sealed' },
      ] as const;
      result.encryption = await withPhaseServers(phaseServers, specs, log, ([clear, sealed]) =>
        runEncryptionPhase(
          { clear, sealed },
          db,
          {
            connections: options.connections,
            durationSeconds: options.durationSeconds,
            warmupSeconds: options.warmupSeconds,
            rounds: options.rounds,
          },
          log,
        ),
      );
    }
    if (runs('wait-storm')) {
      log(
        `[${adapter}] wait storm: ${options.waitRounds} key(s) × ${options.waitRequests} requests per route, ` +
          `handler ${options.waitHoldMs} ms, on two servers per route (at ${elapsed(started)})`,
      );
      // Two servers per configuration, of the same adapter on the same database: the waiters
      // woken across instances (by a notification, or by their poll) run on the second.
      const specs = [
        { name: 'notify-a', idempotency: 'default' },
        { name: 'notify-b', idempotency: 'default' },
        { name: 'poll-a', idempotency: 'poll' },
        { name: 'poll-b', idempotency: 'poll' },
      ] as const;
      result.waitStorm = await withPhaseServers(
        phaseServers,
        specs,
        log,
        ([notifyA, notifyB, pollA, pollB]) =>
          runWaitStormPhase(
            { notify: [notifyA, notifyB], poll: [pollA, pollB] },
            db,
            {
              requests: options.waitRequests,
              rounds: options.waitRounds,
              holdMs: options.waitHoldMs,
            },
            log,
          ),
      );
    }
    if (runs('promises')) {
      log(
        `[${adapter}] promises and bytes allocated per request, ${options.promiseRequests} per case and window (at ${elapsed(started)})`,
      );
      result.promises = await runPromisesPhase(server, db, {
        requests: options.promiseRequests,
        connections: options.connections,
        cases: options.cases,
      });
    }
    log(`[${adapter}] done in ${elapsed(started)}`);
    result.targets = evaluateTargets(result);
    result.seconds = (performance.now() - started) / 1000;
    return result;
  } finally {
    await server.stop();
  }
}

/** The databases of a run with `--baseline`: the baseline's build and its own database. */
interface BaselineRun {
  build: BaselineBuild;
  db: BenchDatabase;
}

/**
 * Starts one build's bench server for a comparison or a count: this checkout's on `db`, or the
 * baseline's (its exported tree) on the baseline's database, each with its own log file.
 *
 * @param wrapped - how the server runs, beyond the defaults (`--instructions`: under callgrind)
 */
function startBuildServer(
  adapter: BenchHttpAdapter,
  which: 'current' | 'baseline',
  db: BenchDatabase,
  baseline: BaselineRun | undefined,
  options: BenchOptions,
  redisUrl: string | undefined,
  runId: string,
  wrapped: Pick<ServerSpawnOptions, 'wrapper' | 'startTimeoutMs' | 'stopGraceMs'> = {},
): Promise<BenchServer> {
  const ofBaseline = which === 'baseline' ? baseline : undefined;
  if (which === 'baseline' && !ofBaseline) throw new Error('no baseline build to start');
  return startBenchServer({
    adapter,
    databaseUrl: (ofBaseline?.db ?? db).url,
    redisUrl,
    poolSize: options.poolSize,
    peerKeyPrefix: `nest-idempotency-bench:${runId}:${adapter}:${which}`,
    logFile: resolve(
      ROOT,
      'bench/results/logs',
      `server-${adapter}${ofBaseline ? '-baseline' : ''}.log`,
    ),
    root: ofBaseline?.build.dir,
    env: ofBaseline?.build.plain ? { NEST_IDEMPOTENCY_PLAIN: ofBaseline.build.plain } : undefined,
    ...wrapped,
  });
}

/**
 * `--baseline`: starts this checkout's server and the baseline commit's for one adapter, both at
 * once and each on its own database, and compares the selected throughput cases on them.
 */
async function compareAdapter(
  adapter: BenchHttpAdapter,
  db: BenchDatabase,
  baselineRun: BaselineRun,
  options: BenchOptions,
  redisUrl: string | undefined,
  runId: string,
): Promise<AdapterResult> {
  const started = performance.now();
  const { build, db: baselineDb } = baselineRun;
  const start = (which: 'current' | 'baseline') =>
    startBuildServer(adapter, which, db, baselineRun, options, redisUrl, runId);
  log(`[${adapter}] starting this checkout's server and the baseline's (${build.ref})`);
  const current = await start('current');
  try {
    const baseline = await start('baseline');
    try {
      log(`[${adapter}] pids ${current.pid} (current) and ${baseline.pid} (baseline)`);
      const rows = await runBaselinePhase(
        { server: current, db },
        { server: baseline, db: baselineDb },
        options,
        current.peer && baseline.peer,
        log,
      );
      log(`[${adapter}] done in ${elapsed(started)}`);
      return {
        adapter,
        peer: current.peer && baseline.peer,
        baseline: rows,
        targets: [],
        seconds: (performance.now() - started) / 1000,
      };
    } finally {
      await baseline.stop();
    }
  } finally {
    await current.stop();
  }
}

/**
 * `--instructions`: starts this checkout's server (and the baseline's, with `--baseline`) under
 * valgrind's callgrind, each on its own database, and counts the main thread's instructions per
 * request of the selected cases.
 */
async function countAdapter(
  adapter: BenchHttpAdapter,
  db: BenchDatabase,
  baseline: BaselineRun | undefined,
  options: BenchOptions,
  redisUrl: string | undefined,
  runId: string,
): Promise<AdapterResult> {
  const started = performance.now();
  const start = (which: CountedBuild['name']) => {
    const suffix = which === 'baseline' ? '-baseline' : '';
    return startBuildServer(adapter, which, db, baseline, options, redisUrl, runId, {
      wrapper: callgrindCommand(
        resolve(ROOT, 'bench/results/logs', `callgrind-${adapter}${suffix}.out`),
        options.cacheSim,
        options.cacheLastLevel,
      ),
      // Node starts far slower under callgrind, and writes callgrind's output as it exits.
      startTimeoutMs: 15 * 60_000,
      stopGraceMs: 5 * 60_000,
    });
  };
  log(`[${adapter}] starting the server${baseline ? 's' : ''} under callgrind (a few minutes)`);
  const names: CountedBuild['name'][] = baseline ? ['current', 'baseline'] : ['current'];
  const servers = await Promise.allSettled(names.map(start));
  const builds: CountedBuild[] = [];
  servers.forEach((server, i) => {
    if (server.status === 'fulfilled') {
      builds.push({
        name: names[i],
        server: server.value,
        db: names[i] === 'baseline' ? baseline!.db : db,
      });
    }
  });
  try {
    const failed = servers.find((server) => server.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    log(
      `[${adapter}] pids ${builds.map((build) => `${build.server.pid} (${build.name})`).join(', ')}`,
    );
    const rows = await runInstructionsPhase(
      builds,
      {
        requests: options.instructionRequests,
        warmupRequests: options.instructionWarmup,
        connections: options.connections,
        rounds: options.rounds,
        cases: options.cases,
      },
      log,
    );
    log(`[${adapter}] done in ${elapsed(started)}`);
    return {
      adapter,
      peer: builds.every((build) => build.server.peer),
      instructions: rows,
      targets: [],
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await Promise.all(builds.map((build) => build.server.stop()));
  }
}

function writeResults(path: string, results: BenchResults): string {
  const file = resolve(ROOT, path);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  return file;
}

/** `npm run bench`: see `--help` and bench/README.md. */
async function main(): Promise<void> {
  const options = parseBenchOptions(process.argv.slice(2));
  if (!options) return;
  // The servers inherit the runner's environment (the baseline's too).
  if (options.asyncHooks) process.env.BENCH_ASYNC_HOOKS = 'on';
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping the bench servers`);
      killAllServers();
      process.exit(130);
    });
  }
  const startedAt = new Date();
  const runId = randomBytes(4).toString('hex');
  const db = await BenchDatabase.open(options.databaseUrl, options.database);
  let baselineInfo: BenchResults['baseline'];
  try {
    let redisUrl = options.redisUrl;
    if (redisUrl && !(await redisAnswers(redisUrl))) {
      log(`Redis does not answer at ${redisUrl}: running without the peer library`);
      redisUrl = undefined;
    }
    const machine = machineInfo(await db.serverVersion());
    log(
      `nest-idempotency bench ${runId}: ${options.adapters.join(', ')}; ${machine.cpuModel} × ${machine.cores}, ` +
        `Node ${machine.node}, PostgreSQL ${machine.postgres}${options.quick ? ' (quick smoke run)' : ''}` +
        `${options.asyncHooks ? ', async hooks on from the start' : ''}`,
    );
    if (options.instructions && !(await callgrindAvailable())) {
      throw new Error('--instructions needs valgrind (callgrind and callgrind_control) installed.');
    }
    log('building the bench app (npm run build: the server runs compiled JavaScript, as apps do)');
    buildBenchApp();
    const adapters: AdapterResult[] = [];
    // The baseline's tables live in their own database: its migrations may be older.
    const build = options.plain
      ? plainBaseline(ROOT, options.plain)
      : options.baseline
        ? buildBaseline(ROOT, options.baseline, log)
        : undefined;
    const baselineDb = build
      ? await BenchDatabase.open(options.databaseUrl, `${options.database}_baseline`)
      : undefined;
    const baseline = build && baselineDb ? { build, db: baselineDb } : undefined;
    try {
      for (const adapter of options.adapters) {
        const result = options.instructions
          ? await countAdapter(adapter, db, baseline, options, redisUrl, runId)
          : baseline
            ? await compareAdapter(adapter, db, baseline, options, redisUrl, runId)
            : await benchAdapter(adapter, db, options, redisUrl, runId);
        adapters.push(result);
        process.stdout.write(`\n${formatAdapterReport(result, options)}\n`);
      }
    } finally {
      await baselineDb?.close();
      if (build && !build.plain) removeBaseline(build.dir);
    }
    if (build) baselineInfo = { ref: build.ref, commit: build.commit, subject: build.subject };
    const finishedAt = new Date();
    // Connection strings stay out of the results file (they may carry credentials).
    const publicOptions: BenchResults['options'] = { ...options };
    delete (publicOptions as Partial<BenchOptions>).databaseUrl;
    delete (publicOptions as Partial<BenchOptions>).redisUrl;
    const results: BenchResults = {
      schemaVersion: 1,
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      seconds: (finishedAt.getTime() - startedAt.getTime()) / 1000,
      machine,
      options: publicOptions,
      ...(baselineInfo ? { baseline: baselineInfo } : {}),
      adapters,
    };
    const file = writeResults(options.output, results);
    process.stdout.write(`\n${formatSummary(results)}\nresults: ${file}\n`);
    // BENCHMARKS.md's chart, from a run that measured every case the way a full run does.
    if (isFullRun(options)) {
      process.stdout.write(`chart: ${writeResultsChart(results, CHART_FILE)}\n`);
    }
  } finally {
    await db.close();
  }
}

main().catch((error: unknown) => {
  killAllServers();
  log(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exitCode = 1;
});

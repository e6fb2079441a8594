import { parseArgs } from 'node:util';
import type { BenchHttpAdapter } from '../app/bench-app.config';
import { BENCH_CASES } from './phases/bench-routes';
import type { BenchCase } from './phases/bench-routes';

/** The parts of a run, in the order they run. */
export const BENCH_PHASES = [
  'throughput',
  'probe',
  'storm',
  'purge',
  'leak',
  'phased',
  'encryption',
  'wait-storm',
  'promises',
] as const;
export type BenchPhase = (typeof BENCH_PHASES)[number];

/** What one `npm run bench` does; every field has a flag. */
export interface BenchOptions {
  /** `--adapters express,fastify`: one server child process per adapter, in this order. */
  adapters: BenchHttpAdapter[];
  /** `--phases`: which parts run (default all); targets of skipped parts show n/a. */
  phases: BenchPhase[];
  /**
   * `--cases`: ids of the throughput cases to run (default all), for a quick look at a few of
   * them side by side; the targets of cases left out show n/a.
   */
  cases: BenchCase['id'][] | undefined;
  /** `--duration` seconds each throughput phase is measured. */
  durationSeconds: number;
  /** `--warmup` seconds of load before each measured phase (not counted). */
  warmupSeconds: number;
  /** `--connections`: concurrent autocannon connections of the throughput phases. */
  connections: number;
  /**
   * `--rounds`: the throughput phases and the storms run this many times, interleaved; each keeps
   * its median round.
   */
  rounds: number;
  /** `--probe-requests`: sequential (one at a time) requests per route for the unloaded p50. */
  probeRequests: number;
  /** `--storm-requests`: concurrent requests on one key in the storm. */
  stormRequests: number;
  /** `--wait-requests`: requests per key in the wait storm, the first included. */
  waitRequests: number;
  /** `--wait-rounds`: keys (storms) per wait-storm route. */
  waitRounds: number;
  /** `--wait-hold`: milliseconds the wait storm's handler takes. */
  waitHoldMs: number;
  /** `--promise-requests`: requests per case whose promises are counted (after as many of warm-up). */
  promiseRequests: number;
  /** `--purge-rows`: expired records bulk-inserted before each purge. */
  purgeRows: number;
  /**
   * `--leak-requests`: requests between the first and the last memory sample. One million at
   * the ~900 req/s this machine manages takes about 20 minutes per adapter, hence 50 000.
   */
  leakRequests: number;
  /**
   * `--provider-latencies`: milliseconds of the fake provider at which the phased and the
   * transactional payment routes are compared.
   */
  providerLatenciesMs: number[];
  /** `--database-url`: a PostgreSQL server (any database on it) where the bench database is created. */
  databaseUrl: string;
  /** `--database`: name of the bench database, created when missing. */
  database: string;
  /** `--redis-url` of the peer; `--no-peer` leaves the peer out. */
  redisUrl: string | undefined;
  /** `--pool-size` of the server's TypeORM pool. */
  poolSize: number;
  /** `--output`: where the JSON results go. */
  output: string;
  /** `--quick`: a smoke run of about half a minute; numbers are not meaningful. */
  quick: boolean;
  /**
   * `--baseline <git-ref>`: instead of the phases, compare the throughput cases (`--cases`,
   * default first, first-tx, replay) of this checkout with that commit's, both servers running,
   * in interleaved rounds.
   */
  baseline: string | undefined;
  /**
   * `--plain <names>`: like `--baseline`, but the build compared with is this same checkout run
   * with `NEST_IDEMPOTENCY_PLAIN=<names>`, so a speed-up in lib/internals/ is measured on and off
   * side by side in one run.
   */
  plain: string | undefined;
  /**
   * `--instructions`: instead of the phases, count the server's main-thread instructions per
   * request of the `--cases` (default floor-interceptor, first, first-tx, replay) under
   * valgrind's callgrind; with `--baseline`, on both builds.
   */
  instructions: boolean;
  /**
   * `--async-hooks`: every server keeps an `AsyncLocalStorage` of its own on from its start, as
   * an application with OpenTelemetry or nestjs-cls does, so on Node 20 every case pays Node's
   * async hooks, not only the library's runs (`BENCH_ASYNC_HOOKS=on`).
   */
  asyncHooks: boolean;
  /** `--instruction-requests`: requests per counted window. */
  instructionRequests: number;
  /** `--instruction-warmup`: requests of warm-up before each case's first window. */
  instructionWarmup: number;
  /**
   * `--cache-sim`: with `--instructions`, callgrind also simulates the caches and branch
   * predictor, and the count adds misses and estimated cycles per request.
   */
  cacheSim: boolean;
  /**
   * `--cache-ll <size,assoc,line>`: the last-level cache `--cache-sim` simulates, when the one
   * valgrind detects is not it (a VM may report a cache no core has).
   */
  cacheLastLevel: string | undefined;
}

/** The cases `--baseline` compares when `--cases` is not given: the library's own routes. */
export const BASELINE_DEFAULT_CASES: readonly BenchCase['id'][] = ['first', 'first-tx', 'replay'];

/** The cases `--instructions` counts when `--cases` is not given: the library and its floor. */
export const INSTRUCTIONS_DEFAULT_CASES: readonly BenchCase['id'][] = [
  'floor-interceptor',
  'first',
  'first-tx',
  'replay',
];

const HELP = `Usage: npm run bench -- [flags]

  --adapters <list>        express,fastify (default both)
  --phases <list>          throughput,probe,storm,purge,leak,phased,encryption,wait-storm,
                           promises (default all)
  --cases <list>           throughput cases by id, e.g. plain,floor,first (default all)
  --duration <s>           measured seconds per case and round (default 4)
  --warmup <s>             warm-up seconds before each case (default 2; 1 after round 1)
  --connections <n>        autocannon connections (default 16)
  --rounds <n>             interleaved rounds of the throughput cases and the storms, medians kept (default 3)
  --probe-requests <n>     sequential requests per route for the unloaded p50 (default 1000)
  --storm-requests <n>     concurrent requests on one key (default 1000)
  --wait-requests <n>      wait storm: requests per key, the first included (default 200)
  --wait-rounds <n>        wait storm: keys per route, one storm each (default 5)
  --wait-hold <ms>         wait storm: how long the handler takes (default 200)
  --promise-requests <n>   promises phase: requests per case in each window (default 2000)
  --purge-rows <n>         expired records to purge (default 1000000)
  --leak-requests <n>      requests between the first and last RSS sample (default 50000)
  --provider-latencies <l> provider latencies in ms of the phased comparison (default 0,50)
  --database-url <url>     PostgreSQL server (default $DATABASE_URL or postgres://postgres@127.0.0.1:5432/test)
  --database <name>        bench database, created when missing (default bench)
  --redis-url <url>        Redis of the peer library (default $REDIS_URL or redis://127.0.0.1:6379)
  --no-peer                skip @node-idempotency/nestjs
  --pool-size <n>          server's TypeORM pool size (default 20)
  --output <file>          JSON results (default bench/results/latest.json, quick.json with --quick)
  --quick                  smoke run (~1 min for both adapters): tiny durations and counts
  --baseline <git-ref>     compare this checkout with that commit: only the --cases (default
                           first,first-tx,replay), both servers up, in interleaved rounds; the
                           baseline uses the database <--database>_baseline
  --plain <names>          like --baseline, against this same checkout run with
                           NEST_IDEMPOTENCY_PLAIN=<names> (lib/internals/ tricks off: a list, or all)
  --instructions           count the server's main-thread instructions per request under
                           valgrind's callgrind instead of the phases: the --cases (default
                           floor-interceptor,first,first-tx,replay), with --baseline on both
                           builds; 1 connection unless --connections is given
  --instruction-requests <n>  requests per counted window (default 400)
  --instruction-warmup <n>    warm-up requests before each case's first window (default 1000)
  --cache-sim              with --instructions: also simulate the caches and branch predictor
                           and report misses and estimated cycles per request (about 2× slower)
  --cache-ll <s,a,l>       with --cache-sim: the last-level cache to simulate, in bytes, ways and
                           line bytes (valgrind's --LL), e.g. 1048576,16,64 for a 1 MiB L2
  --async-hooks            servers keep an AsyncLocalStorage on from their start, as an app with
                           OpenTelemetry or nestjs-cls does: on Node 20 every case pays async hooks
                           (not with --baseline)
  --help
`;

function positive(name: string, raw: string | undefined, fallback: number, integer = true): number {
  if (raw === undefined) return fallback;
  const value = Number(raw.replace(/_/g, ''));
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new Error(`--${name} ${raw}: use a positive ${integer ? 'integer' : 'number'}.`);
  }
  return value;
}

/**
 * Parses `npm run bench` flags.
 *
 * @param argv - the arguments after the script name
 * @param env - for `DATABASE_URL` and `REDIS_URL` defaults
 * @returns the options, or `undefined` after printing the help for `--help`
 * @throws Error naming the flag and the fix when a value is invalid
 */
export function parseBenchOptions(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): BenchOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      adapters: { type: 'string' },
      phases: { type: 'string' },
      cases: { type: 'string' },
      'promise-requests': { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      rounds: { type: 'string' },
      'probe-requests': { type: 'string' },
      'storm-requests': { type: 'string' },
      'wait-requests': { type: 'string' },
      'wait-rounds': { type: 'string' },
      'wait-hold': { type: 'string' },
      'purge-rows': { type: 'string' },
      'leak-requests': { type: 'string' },
      'provider-latencies': { type: 'string' },
      'database-url': { type: 'string' },
      database: { type: 'string' },
      'redis-url': { type: 'string' },
      'no-peer': { type: 'boolean', default: false },
      'pool-size': { type: 'string' },
      output: { type: 'string' },
      quick: { type: 'boolean', default: false },
      baseline: { type: 'string' },
      plain: { type: 'string' },
      instructions: { type: 'boolean', default: false },
      'instruction-requests': { type: 'string' },
      'instruction-warmup': { type: 'string' },
      'cache-sim': { type: 'boolean', default: false },
      'cache-ll': { type: 'string' },
      'async-hooks': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return undefined;
  }
  const quick = values.quick === true;
  const adapters = (values.adapters ?? 'express,fastify')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
  for (const adapter of adapters) {
    if (adapter !== 'express' && adapter !== 'fastify') {
      throw new Error(`--adapters ${values.adapters}: use express, fastify or express,fastify.`);
    }
  }
  if (adapters.length === 0) throw new Error('--adapters: name at least one adapter.');
  const phases = (values.phases ?? BENCH_PHASES.join(','))
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
  for (const phase of phases) {
    if (!(BENCH_PHASES as readonly string[]).includes(phase)) {
      throw new Error(`--phases ${values.phases}: use a list of ${BENCH_PHASES.join(', ')}.`);
    }
  }
  const caseIds = BENCH_CASES.map((benchCase) => benchCase.id as string);
  const cases = values.cases
    ?.split(',')
    .map((id) => id.trim())
    .filter(Boolean);
  if (cases?.some((id) => !caseIds.includes(id)) || cases?.length === 0) {
    throw new Error(`--cases ${values.cases}: use a list of ${caseIds.join(', ')}.`);
  }
  const baseline = values.baseline?.trim();
  if (baseline !== undefined && (!baseline || baseline.startsWith('-'))) {
    throw new Error(`--baseline ${values.baseline}: name a commit, branch or tag.`);
  }
  const plain = values.plain?.trim();
  if (plain !== undefined && (!/^[\w-]+(,[\w-]+)*$/.test(plain) || baseline !== undefined)) {
    throw new Error(`--plain ${values.plain}: name tricks (a,b or all), and leave out --baseline.`);
  }
  if ((baseline ?? plain) !== undefined && values.phases !== undefined) {
    throw new Error(
      '--baseline and --plain compare the throughput cases only: leave out --phases.',
    );
  }
  if (baseline !== undefined && values['async-hooks'] === true) {
    // The baseline's server may predate BENCH_ASYNC_HOOKS: it would run without them.
    throw new Error('--async-hooks cannot be given with --baseline: an earlier build ignores it.');
  }
  const instructions = values.instructions === true;
  if (instructions && values.phases !== undefined) {
    throw new Error('--instructions counts the throughput cases only: leave out --phases.');
  }
  const cacheSim = values['cache-sim'] === true;
  if (cacheSim && !instructions) {
    throw new Error('--cache-sim adds to the count of --instructions: give both.');
  }
  const cacheLastLevel = values['cache-ll'];
  if (cacheLastLevel !== undefined && (!cacheSim || !/^\d+,\d+,\d+$/.test(cacheLastLevel))) {
    throw new Error(
      `--cache-ll ${cacheLastLevel}: give it with --cache-sim, as size,associativity,line size in bytes.`,
    );
  }
  const latencies = (values['provider-latencies'] ?? '0,50')
    .split(',')
    .map((raw) => raw.trim())
    .filter(Boolean)
    .map(Number);
  if (
    latencies.length === 0 ||
    latencies.some((ms) => !Number.isInteger(ms) || ms < 0 || ms > 60_000)
  ) {
    throw new Error(
      `--provider-latencies ${values['provider-latencies']}: use a list of integers from 0 to 60000 (ms).`,
    );
  }
  if (values['wait-requests'] !== undefined && Number(values['wait-requests']) < 2) {
    throw new Error(
      `--wait-requests ${values['wait-requests']}: use at least 2 (the first request and a waiter).`,
    );
  }
  const database = values.database ?? 'bench';
  if (!/^[a-z_][a-z0-9_]*$/.test(database)) {
    throw new Error(`--database ${database}: use lower-case letters, digits and underscores.`);
  }
  return {
    adapters: adapters as BenchHttpAdapter[],
    phases: phases as BenchPhase[],
    cases: (cases ??
      (instructions
        ? [...INSTRUCTIONS_DEFAULT_CASES]
        : baseline || plain
          ? [...BASELINE_DEFAULT_CASES]
          : undefined)) as BenchCase['id'][] | undefined,
    durationSeconds: positive('duration', values.duration, quick ? 1 : 4, false),
    warmupSeconds: positive('warmup', values.warmup, quick ? 0.3 : 2, false),
    connections: positive('connections', values.connections, instructions ? 1 : 16),
    rounds: positive('rounds', values.rounds, quick ? 1 : 3),
    probeRequests: positive('probe-requests', values['probe-requests'], quick ? 20 : 1000),
    stormRequests: positive('storm-requests', values['storm-requests'], quick ? 200 : 1000),
    waitRequests: positive('wait-requests', values['wait-requests'], quick ? 40 : 200),
    waitRounds: positive('wait-rounds', values['wait-rounds'], quick ? 1 : 5),
    waitHoldMs: positive('wait-hold', values['wait-hold'], 200),
    promiseRequests: positive('promise-requests', values['promise-requests'], quick ? 200 : 2000),
    purgeRows: positive('purge-rows', values['purge-rows'], quick ? 10_000 : 1_000_000),
    leakRequests: positive('leak-requests', values['leak-requests'], quick ? 1_000 : 50_000),
    providerLatenciesMs: [...new Set(latencies)],
    databaseUrl:
      values['database-url'] ?? env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    database,
    redisUrl: values['no-peer']
      ? undefined
      : (values['redis-url'] ?? env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
    poolSize: positive('pool-size', values['pool-size'], 20),
    output: values.output ?? (quick ? 'bench/results/quick.json' : 'bench/results/latest.json'),
    quick,
    baseline,
    plain,
    instructions,
    instructionRequests: positive(
      'instruction-requests',
      values['instruction-requests'],
      quick ? 40 : 400,
    ),
    instructionWarmup: positive(
      'instruction-warmup',
      values['instruction-warmup'],
      quick ? 40 : 1000,
    ),
    cacheSim,
    cacheLastLevel,
    asyncHooks: values['async-hooks'] === true,
  };
}

import type { BenchOptions } from './bench-options';
import type { AdapterResult, BenchResults } from './bench-results';
import { median } from './latency-stats';
import { SAMPLE_INTERVAL_MS } from './phases/phased.phase';
import type { StormResult } from './phases/storm.phase';
import { medianOverRounds } from './phases/wait-storm.phase';
import type { Align } from './text-table';
import { formatTable } from './text-table';

const int = (value: number) => Math.round(value).toLocaleString('en-US');
const fixed = (value: number, digits = 2) => value.toFixed(digits);
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
const signedMb = (bytes: number) => `${bytes >= 0 ? '+' : ''}${mb(bytes)} MB`;
const statuses = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([status, count]) => `${status}×${count}`)
    .join(' ') || '—';
const verdict = (pass: boolean | undefined) =>
  pass === undefined ? 'n/a' : pass ? 'PASS' : 'FAIL';

function signed(value: number): string {
  return `${value >= 0 ? '+' : '−'}${int(Math.abs(value))}`;
}

/** `count` right-aligned columns. */
const right = (count: number) => Array<'right'>(count).fill('right');

function throughputSection(result: AdapterResult, options: BenchOptions): string | undefined {
  if (!result.throughput) return undefined;
  const title =
    `Throughput — ${options.connections} connections, ${options.durationSeconds} s measured ` +
    `after ${options.warmupSeconds} s warm-up` +
    (options.rounds > 1
      ? `, ${options.rounds} interleaved rounds (median; per-round ratios in brackets)`
      : '');
  const plain = result.throughput.find((row) => row.id === 'plain');
  const rounds = (values: number[]) =>
    values.length > 1 ? ` (${values.map((r) => fixed(r)).join('/')})` : '';
  const rows = result.throughput.map((row) => [
    row.label,
    row.path,
    int(row.rps),
    fixed(row.latency.p50),
    fixed(row.latency.p99),
    `${fixed(row.ratioToPlain)}×${rounds(row.roundsRatio)}`,
    Number.isNaN(row.ratioToFloor)
      ? '–'
      : `${fixed(row.ratioToFloor)}×${rounds(row.roundsRatioToFloor)}`,
    int(row.cpu.serverUs),
    int(row.cpu.serverMainUs),
    int(row.cpu.postgresUs),
    plain ? signed(row.cpu.serverUs - plain.cpu.serverUs) : '–',
    plain ? signed(row.cpu.postgresUs - plain.cpu.postgresUs) : '–',
    int(row.executions),
    statuses(row.statuses) + (row.errors ? ` err×${row.errors}` : ''),
  ]);
  return (
    `${title}\n${formatTable(
      [
        'case',
        'route',
        'req/s',
        'p50 ms',
        'p99 ms',
        'vs plain',
        'vs floor',
        'server µs/req',
        'main thread µs/req',
        'PG µs/req',
        'Node µs beyond plain',
        'PG µs beyond plain',
        'executions',
        'statuses',
      ],
      rows,
      ['left', 'left', ...right(11), 'left'],
    )}\nCPU per request: the server process (all its threads, then its main thread alone) and the ` +
    `PostgreSQL backends of its pool (from /proc); ` +
    `"beyond plain" is the case's minus plain's, each the median over the rounds.`
  );
}

function probeSection(result: AdapterResult, options: BenchOptions): string | undefined {
  if (!result.probe) return undefined;
  const rows = result.probe.map((row) => [
    row.label,
    fixed(row.latency.p50),
    fixed(row.latency.p90),
    fixed(row.latency.p99),
    row.id === 'plain' ? '—' : `${row.addedP50Ms >= 0 ? '+' : ''}${fixed(row.addedP50Ms)}`,
    Object.keys(row.unexpected).length ? statuses(row.unexpected) : '',
  ]);
  return (
    `Unloaded latency — 1 connection, one request at a time, ${options.probeRequests} per case, interleaved\n` +
    formatTable(['case', 'p50 ms', 'p90 ms', 'p99 ms', 'added p50 ms', 'not 201'], rows)
  );
}

/** A storm's server CPU in ms, the median over its rounds. */
function serverCpuOf(storm: StormResult): string {
  const cpu = (storm.rounds ?? [storm]).flatMap((round) =>
    round.serverCpuMs === undefined ? [] : [round.serverCpuMs],
  );
  return cpu.length ? fixed(median(cpu)) : '';
}

function stormSection(result: AdapterResult, options: BenchOptions): string | undefined {
  if (!result.storms) return undefined;
  const rows = result.storms.map((storm) => [
    storm.path,
    (storm.rounds ?? [storm]).map((round) => round.executions).join('/'),
    statuses(storm.statuses),
    String(storm.replayed),
    fixed(storm.latency.p50),
    fixed(storm.latency.p99),
    fixed(storm.latency.max),
    fixed(storm.wallMs, 0),
    storm.p99ToFloor?.length ? storm.p99ToFloor.map((r) => r.toFixed(2)).join('/') : '',
    serverCpuOf(storm),
    storm.cpuToFloor?.length ? fixed(median(storm.cpuToFloor)) : '',
  ]);
  const rounds =
    options.rounds > 1
      ? `, ${options.rounds} interleaved rounds (each route's round with the median p99; ` +
        'executions and p99 vs the bare storm per round; server CPU and its ratio the medians)'
      : '';
  return (
    `Same-key storm — ${options.stormRequests} concurrent requests, one key, connections opened beforehand${rounds}\n` +
    formatTable(
      [
        'route',
        'executions',
        'statuses',
        'replayed',
        'p50 ms',
        'p99 ms',
        'max ms',
        'wall ms',
        'p99 vs bare storm',
        'server CPU ms',
        'CPU vs bare storm',
      ],
      rows,
      ['left', 'right', 'left', ...Array<Align>(8).fill('right')],
    )
  );
}

function purgeSection(result: AdapterResult): string | undefined {
  const { purge } = result;
  if (!purge) return undefined;
  const rows = [
    ['alone', int(purge.idle.deleted), int(purge.idle.durationMs), int(purge.idle.rowsPerSecond)],
    [
      'under first-execution load',
      int(purge.underLoad.deleted),
      int(purge.underLoad.durationMs),
      int(purge.underLoad.rowsPerSecond),
    ],
  ];
  return (
    `Purge — ${int(purge.idle.seeded)} expired records, IdempotencyPurgeService.purgeExpired() in the server\n` +
    formatTable(['run', 'deleted', 'ms', 'rows/s'], rows) +
    `\nseeding: INSERT … generate_series ${int(purge.idle.insertMs)} ms, VACUUM (ANALYZE) ${int(purge.idle.vacuumMs)} ms; ` +
    `expired left: ${purge.idle.leftExpired} / ${purge.underLoad.leftExpired}\n` +
    `claim (/idempotent, new keys) idle: ${int(purge.claimIdle.rps)} req/s, p50 ${fixed(purge.claimIdle.latency.p50)} ms, ` +
    `p99 ${fixed(purge.claimIdle.latency.p99)} ms; during purge: ${int(purge.claimDuringPurge.rps)} req/s, ` +
    `p50 ${fixed(purge.claimDuringPurge.latency.p50)} ms, p99 ${fixed(purge.claimDuringPurge.latency.p99)} ms ` +
    `(${fixed(purge.p99Ratio)}×, ${int(purge.claimDuringPurge.responses)} responses in the window)`
  );
}

function leakSection(result: AdapterResult): string | undefined {
  const { leak } = result;
  if (!leak) return undefined;
  const rows = leak.samples.map((sample) => [
    int(sample.afterRequests),
    mb(sample.rssBytes),
    mb(sample.heapUsedBytes),
  ]);
  return (
    `Memory — ${int(leak.requests)} requests cycling ${leak.mix.join(', ')}; ` +
    `sampled after a full GC, after ${int(leak.warmupRequests)} warm-up requests\n` +
    formatTable(['after requests', 'RSS MB', 'heap used MB'], rows) +
    `\ngrowth: RSS ${signedMb(leak.rssGrowthBytes)}, heap ${signedMb(leak.heapGrowthBytes)}; ` +
    `${int(leak.rps)} req/s over ${fixed(leak.seconds, 0)} s` +
    (Object.keys(leak.unexpected).length ? `; not 201: ${statuses(leak.unexpected)}` : '')
  );
}

function promisesSection(result: AdapterResult, options: BenchOptions): string | undefined {
  const { promises } = result;
  if (!promises) return undefined;
  const plain = promises.find((row) => row.id === 'plain');
  const beyond = (value: number, base: number | undefined, digits: number) =>
    base === undefined
      ? '–'
      : `${value >= base ? '+' : '−'}${fixed(Math.abs(value - base), digits)}`;
  const rows = promises.map((row) => [
    row.label,
    row.path,
    fixed(row.perRequest, 1),
    beyond(row.perRequest, plain?.perRequest, 1),
    fixed(row.allocatedPerRequest / 1024, 1),
    beyond(row.allocatedPerRequest / 1024, plain && plain.allocatedPerRequest / 1024, 1),
    statuses(row.statuses),
  ]);
  return (
    `Promises and allocations — created in the server per request, ${int(options.promiseRequests)} requests ` +
    `per case in each window after as many of warm-up, ${options.connections} connections (promises: ` +
    "async_hooks; KB allocated on the heap: V8's sampling heap profiler, in a window of its own; " +
    'both on for this phase only)\n' +
    formatTable(
      ['case', 'route', 'promises/req', 'vs plain', 'KB allocated/req', 'vs plain', 'statuses'],
      rows,
      ['left', 'left', ...right(4), 'left'],
    )
  );
}

function phasedSection(result: AdapterResult, options: BenchOptions): string | undefined {
  if (!result.phased) return undefined;
  const title =
    `Phases — payment: entry pending, provider call (derivedKey('charge')), entry succeeded; ` +
    `first executions, ${options.connections} connections, ${options.durationSeconds} s measured ` +
    `after ${options.warmupSeconds} s warm-up` +
    (options.rounds > 1
      ? `, ${options.rounds} interleaved rounds (median; per-round ratios in brackets)`
      : '');
  const rows = result.phased.map((row) => [
    row.label,
    row.path.split('?')[0],
    String(row.providerLatencyMs),
    int(row.rps),
    fixed(row.latency.p50),
    fixed(row.latency.p99),
    row.style === 'transactional'
      ? '1.00×'
      : `${fixed(row.ratioToTransactional)}×` +
        (row.roundsRatio.length > 1 ? ` (${row.roundsRatio.map((r) => fixed(r)).join('/')})` : ''),
    String(row.sessions.idleInTransactionPeak),
    fixed(row.sessions.idleInTransactionMean),
    `${fixed(row.sessions.medianLongestIdleInTransactionMs, 1)} / ${fixed(row.sessions.longestIdleInTransactionMs, 1)}`,
    int(row.cpu.serverUs),
    int(row.cpu.postgresUs),
    int(row.executions),
    int(row.charges),
    statuses(row.statuses) + (row.errors ? ` err×${row.errors}` : ''),
  ]);
  const samples = result.phased.map((row) => row.sessions.samples);
  const header = [
    'case',
    'route',
    'provider ms',
    'req/s',
    'p50 ms',
    'p99 ms',
    'vs tx',
    'idle in tx peak',
    'idle in tx mean',
    'longest idle ms',
    'server µs/req',
    'PG µs/req',
    'executions',
    'charges',
    'statuses',
  ];
  const align = header.map((_, column): Align =>
    column < 2 || column === header.length - 1 ? 'left' : 'right',
  );
  return (
    `${title}\n${formatTable(header, rows, align)}\n` +
    `idle in tx: sessions of the server's pool in state 'idle in transaction' (pg_stat_activity, ` +
    `read every ${SAMPLE_INTERVAL_MS} ms during the measured run, ${Math.min(...samples)}–${Math.max(...samples)} ` +
    `samples per case); longest idle: how long the longest of them had been idle, median over ` +
    `samples / max. Executions and charges: rows the run's requests wrote.`
  );
}

function encryptionSection(result: AdapterResult, options: BenchOptions): string | undefined {
  if (!result.encryption) return undefined;
  const title =
    `Encryption at rest — the same route on two servers whose configurations differ only in ` +
    `encryption, sealed and in the clear ` +
    `(replay cache off: replays read and open the record), ${options.connections} connections, ` +
    `${options.durationSeconds} s measured after ${options.warmupSeconds} s warm-up` +
    (options.rounds > 1
      ? `, ${options.rounds} interleaved rounds (median; per-round ratios in brackets)`
      : '');
  const clearOf = (row: (typeof result.encryption)[number]) =>
    result.encryption!.find((r) => r.mode === row.mode && r.bytes === row.bytes && !r.sealed);
  const rows = result.encryption.map((row) => {
    const clear = clearOf(row);
    return [
      row.mode === 'first' ? 'first execution' : 'replay',
      row.bytes >= 1024 ? `${row.bytes / 1024} KB` : `${row.bytes} B`,
      row.sealed ? 'sealed' : 'clear',
      row.path,
      int(row.rps),
      fixed(row.latency.p50),
      fixed(row.latency.p99),
      row.sealed
        ? `${fixed(row.ratioToClear)}×` +
          (row.roundsRatio.length > 1 ? ` (${row.roundsRatio.map((r) => fixed(r)).join('/')})` : '')
        : '1.00×',
      int(row.cpu.serverUs),
      row.sealed && clear ? signed(row.cpu.serverUs - clear.cpu.serverUs) : '—',
      int(row.cpu.postgresUs),
      int(row.executions),
      statuses(row.statuses) + (row.errors ? ` err×${row.errors}` : ''),
    ];
  });
  const header = [
    'case',
    'body',
    'records',
    'route',
    'req/s',
    'p50 ms',
    'p99 ms',
    'vs clear',
    'server µs/req',
    'server µs beyond clear',
    'PG µs/req',
    'executions',
    'statuses',
  ];
  const align = header.map((_, column): Align =>
    column < 4 || column === header.length - 1 ? 'left' : 'right',
  );
  return (
    `${title}\n${formatTable(header, rows, align)}\n` +
    `AES-256-GCM (node:crypto) seals headers and body on completion and opens them on a replay ` +
    `read from PostgreSQL; "beyond clear" is the sealed case's server CPU minus its clear twin's.`
  );
}

/** How the waiters of each wait-storm route are woken. */
const WAKE_UPS_LABEL = {
  notify: 'LISTEN/NOTIFY',
  poll: 'polling',
  floor: 'floor, no library',
} as const;

function waitStormSection(result: AdapterResult, options: BenchOptions): string | undefined {
  const phase = result.waitStorm;
  if (!phase) return undefined;
  const title =
    `Wait storm — per key ${options.waitRequests} requests with Prefer: wait=10 on two servers per ` +
    `route (in its configuration; the floor's on the LISTEN/NOTIFY pair), one database: the ` +
    `first to A, then, once its claim is in, ${options.waitRequests - 1} waiters at once, ` +
    `alternately to B and A; handler ${options.waitHoldMs} ms; ${options.waitRounds} ` +
    `key(s) per route, the routes alternating; wake-up latency from the completion's commit`;
  const rows = phase.paths.flatMap((path) =>
    (['same', 'other', 'all'] as const).map((instance) => {
      const statusCounts =
        instance === 'all'
          ? Object.fromEntries(
              [
                ...new Set([
                  ...Object.keys(path.statuses.same),
                  ...Object.keys(path.statuses.other),
                ]),
              ].map((status) => [
                status,
                (path.statuses.same[status] ?? 0) + (path.statuses.other[status] ?? 0),
              ]),
            )
          : path.statuses[instance];
      const from = path.fromCommit[instance];
      const fromWrite = path.fromWrite[instance];
      const fromFirst = path.fromFirstAnswer[instance];
      return [
        instance === 'same' ? WAKE_UPS_LABEL[path.wakeUps] : '',
        instance === 'same' ? path.path : '',
        instance === 'same' ? 'A (first request)' : instance === 'other' ? 'B' : 'both',
        instance === 'all' ? path.rounds.map((round) => round.executions).join('/') : '',
        statuses(statusCounts),
        instance === 'all'
          ? String(path.waited.same + path.waited.other)
          : String(path.waited[instance]),
        fixed(from.p50),
        fixed(from.p99),
        fixed(from.max),
        `${fixed(fromWrite.p50)} / ${fixed(fromWrite.p99)}`,
        `${fixed(fromFirst.p50)} / ${fixed(fromFirst.p99)}`,
      ];
    }),
  );
  const header = [
    'wake-ups',
    'route',
    'waiters on',
    'executions',
    'statuses',
    'waited',
    'p50 ms',
    'p99 ms',
    'max ms',
    'from write p50 / p99 ms',
    'from 1st answer p50 / p99 ms',
  ];
  const align = header.map((_, column): Align => (column < 3 || column === 4 ? 'left' : 'right'));
  const notWaited = phase.paths.map((path) => `${path.path} ${path.notWaited}`).join(', ');
  const lag = (field: 'commitAfterWriteMs' | 'firstAnswerAfterCommitMs') =>
    phase.paths.map((path) => `${path.path} ${fixed(medianOverRounds(path, field))} ms`).join(', ');
  const perRound = phase.paths
    .map((path) => `${path.path} ${path.rounds.map((round) => fixed(round.p99)).join('/')}`)
    .join('; ');
  return (
    `${title}\n${formatTable(header, rows, align)}\n` +
    `p50/p99/max: from the completion's commit, as the runner's own listening connection sees it ` +
    `(the completion's notification arrives), to each waiter's answer at the runner. From write: ` +
    `from the record's updated_at (clock_timestamp() in the completing statement, before its ` +
    `commit). "waited": answers with Preference-Applied (the waiter slept); waiters answered ` +
    `without sleeping (they came after the completion; not in the latencies): ${notWaited}. ` +
    `Executions per key; statuses over all keys (the first request counted on A). Poll interval ` +
    `${phase.paths[0]?.pollIntervalSeconds ?? '–'} s (wait.pollIntervalSeconds; the LISTEN/NOTIFY ` +
    `route polls too). Listening connections of the servers: ${phase.listening} (one per server ` +
    `of the LISTEN/NOTIFY pair expected). p99 per key: ${perRound}. Medians over keys: commit ` +
    `seen after the write ${lag('commitAfterWriteMs')}; first request's answer after the commit ` +
    `${lag('firstAnswerAfterCommitMs')}. Clock check, PostgreSQL − runner: ` +
    `${fixed(phase.clock.offsetMs, 3)} ms ± ${fixed(phase.clock.uncertaintyMs, 3)} ms (not corrected).`
  );
}

/** What a comparison ran against: a commit, or this checkout with tricks off (`--plain`). */
function comparedWith(options: BenchOptions): string | undefined {
  return options.plain ? `NEST_IDEMPOTENCY_PLAIN=${options.plain}` : options.baseline;
}

function baselineSection(result: AdapterResult, options: BenchOptions): string | undefined {
  if (!result.baseline) return undefined;
  const title =
    `Against the baseline ${comparedWith(options)} — ${options.connections} connections, ` +
    `${options.durationSeconds} s measured after ${options.warmupSeconds} s warm-up, ` +
    `${options.rounds} interleaved round(s), the baseline first in odd rounds`;
  const rows = result.baseline.map((row) => {
    const { current, baseline } = row;
    if (!row.comparable || !current || !baseline) {
      return [row.label, row.path, 'not comparable: no such route on the baseline'];
    }
    const flagged = (figures: typeof current) =>
      statuses(figures.statuses) + (figures.errors ? ` err×${figures.errors}` : '');
    return [
      row.label,
      row.path,
      int(baseline.rps),
      int(current.rps),
      `${fixed(row.ratio)}×`,
      `${fixed(row.ratioMin)}–${fixed(row.ratioMax)}`,
      row.roundsRatio.map((ratio) => fixed(ratio)).join('/'),
      fixed(baseline.p99),
      fixed(current.p99),
      `${int(baseline.cpu.serverUs)} (${int(baseline.cpu.serverMainUs)})`,
      `${int(current.cpu.serverUs)} (${int(current.cpu.serverMainUs)})`,
      `${fixed(row.cpuRatio)}×`,
      flagged(baseline),
      flagged(current),
    ];
  });
  return (
    `${title}\n${formatTable(
      [
        'case',
        'route',
        'baseline req/s',
        'current req/s',
        'current/baseline',
        'range',
        'per round',
        'baseline p99 ms',
        'current p99 ms',
        'baseline server µs/req (main thread)',
        'current server µs/req (main thread)',
        'server CPU current/baseline',
        'baseline statuses',
        'current statuses',
      ],
      rows,
      ['left', 'left', ...right(4), 'left', ...right(5), 'left', 'left'],
    )}\nreq/s, p99 and CPU: medians over the rounds; current/baseline: the median of the per-round ` +
    `ratios. CPU per request is the server process's, all its threads (its main thread alone).`
  );
}

function instructionsSection(result: AdapterResult, options: BenchOptions): string | undefined {
  if (!result.instructions) return undefined;
  const compared = result.instructions.some((row) => row.baseline);
  const title =
    `Main-thread instructions per request under callgrind, thousands — ${options.connections} ` +
    `connection(s), windows of ${options.instructionRequests} requests after a full GC, ` +
    `${options.rounds} round(s)${compared ? `, against the baseline ${comparedWith(options)}` : ''}`;
  const thousands = (count: number) => int(count / 1000);
  const perRound = (counts: number[]) => counts.map(thousands).join('/');
  const toFloor = (ratio: number | undefined) => (ratio === undefined ? '' : `${fixed(ratio)}×`);
  const rows = result.instructions.map((row) => [
    row.label,
    row.path,
    ...(compared
      ? [
          row.baseline ? thousands(row.baseline.perRequest) : '',
          row.baseline ? perRound(row.baseline.roundsPerRequest) : '',
        ]
      : []),
    thousands(row.current.perRequest),
    perRound(row.current.roundsPerRequest),
    ...(compared
      ? [
          row.ratio === undefined ? '' : `${fixed(row.ratio, 3)}×`,
          row.ratio === undefined ? '' : `${fixed(row.ratioMin!, 3)}–${fixed(row.ratioMax!, 3)}`,
          toFloor(row.baseline?.toFloorInterceptor),
        ]
      : []),
    toFloor(row.current.toFloorInterceptor),
    statuses(row.current.statuses),
  ]);
  const headers = [
    'case',
    'route',
    ...(compared ? ['baseline', 'per round'] : []),
    'current',
    'per round',
    ...(compared ? ['current/baseline', 'range', 'baseline / floor-int'] : []),
    compared ? 'current / floor-int' : '/ floor from an interceptor',
    'statuses',
  ];
  const align = headers.map((_, i): Align =>
    i < 2 || i === headers.length - 1 ? 'left' : 'right',
  );
  return (
    `${title}\n${formatTable(headers, rows, align)}\n` +
    'Medians over the rounds; ratios are medians of the per-round ratios.'
  );
}

function simulationSection(result: AdapterResult): string | undefined {
  const simulated = result.instructions?.filter((row) => row.current.simulated);
  if (!simulated?.length) return undefined;
  const compared = simulated.some((row) => row.baseline?.simulated);
  const rows = simulated.map((row) => {
    const { perRequest, roundsCycles, cyclesToFloorInterceptor } = row.current.simulated!;
    const baseline = row.baseline?.simulated;
    return [
      row.label,
      int(row.current.perRequest / 1000),
      ...(compared ? [baseline ? int(baseline.perRequest.cycles / 1000) : ''] : []),
      int(perRequest.cycles / 1000),
      roundsCycles.map((cycles) => int(cycles / 1000)).join('/'),
      ...(compared ? [row.cyclesRatio === undefined ? '' : `${fixed(row.cyclesRatio, 3)}×`] : []),
      cyclesToFloorInterceptor === undefined ? '' : `${fixed(cyclesToFloorInterceptor)}×`,
      int(perRequest.instructionL1Misses),
      int(perRequest.dataL1Misses),
      int(perRequest.instructionLlMisses),
      int(perRequest.dataLlMisses),
      int(perRequest.branchMisses),
    ];
  });
  const headers = [
    'case',
    'instructions',
    ...(compared ? ['baseline cycles'] : []),
    'cycles',
    'per round',
    ...(compared ? ['current/baseline'] : []),
    '/ floor-int',
    'I1 misses',
    'D1 misses',
    'LLi misses',
    'LLd misses',
    'branch misses',
  ];
  return (
    'Cache and branch simulation (--cache-sim), per request: thousands of instructions and of ' +
    'estimated cycles (L1 hits + 5 × LL hits + 35 × memory), misses\n' +
    `${formatTable(
      headers,
      rows,
      headers.map((_, i): Align => (i === 0 ? 'left' : 'right')),
    )}\n` +
    'Medians over the rounds; the cycles are an estimate from a simulated cache, not a measurement.'
  );
}

function targetsSection(result: AdapterResult): string | undefined {
  // A comparison or a count checks no targets.
  if (result.baseline || result.instructions) return undefined;
  return (
    'Targets\n' +
    formatTable(
      ['target', 'wanted', 'measured', 'result'],
      result.targets.map((check) => [
        check.name,
        check.target,
        check.measured,
        verdict(check.pass),
      ]),
      ['left', 'left', 'left', 'left'],
    )
  );
}

/**
 * The report of one adapter: throughput table with ratios to plain, unloaded latency, storms,
 * purge, memory, the phased payment route against the transactional one, encryption at rest,
 * and the targets with PASS/FAIL.
 */
export function formatAdapterReport(result: AdapterResult, options: BenchOptions): string {
  const heading = `== ${result.adapter} ${'='.repeat(Math.max(3, 94 - result.adapter.length))}`;
  return [
    heading,
    throughputSection(result, options),
    probeSection(result, options),
    stormSection(result, options),
    purgeSection(result),
    leakSection(result),
    phasedSection(result, options),
    encryptionSection(result, options),
    waitStormSection(result, options),
    promisesSection(result, options),
    baselineSection(result, options),
    instructionsSection(result, options),
    simulationSection(result),
    targetsSection(result),
  ]
    .filter((section) => section !== undefined)
    .join('\n\n');
}

/** One line per adapter: how many targets passed, and the run's machine. */
export function formatSummary(results: BenchResults): string {
  const { machine } = results;
  const lines = results.adapters.map((adapter) => {
    if (adapter.instructions) {
      const counts = adapter.instructions.map(
        (row) =>
          `${row.id} ${int(row.current.perRequest / 1000)} k` +
          (row.current.simulated
            ? ` (${int(row.current.simulated.perRequest.cycles / 1000)} k cycles)`
            : '') +
          (row.ratio === undefined ? '' : ` (${fixed(row.ratio, 3)}× the baseline)`),
      );
      return `${adapter.adapter}: instructions per request ${counts.join(', ')}`;
    }
    if (adapter.baseline) {
      const ratios = adapter.baseline.map((row) =>
        row.comparable ? `${row.id} ${fixed(row.ratio)}×` : `${row.id} not comparable`,
      );
      return `${adapter.adapter}: current/baseline ${ratios.join(', ')}`;
    }
    const checked = adapter.targets.filter((check) => check.pass !== undefined);
    const failed = checked.filter((check) => !check.pass).map((check) => check.name);
    return (
      `${adapter.adapter}: ${checked.length - failed.length}/${checked.length} targets pass` +
      (failed.length ? ` — FAIL: ${failed.join('; ')}` : '')
    );
  });
  return [
    `== summary ${'='.repeat(85)}`,
    ...lines,
    `${machine.cpuModel} × ${machine.cores}, ${machine.os}, Node ${machine.node}, PostgreSQL ${machine.postgres}, ` +
      `load average at start ${machine.loadAverage.join(' ')}${machine.commit ? `, commit ${machine.commit}` : ''}` +
      `${results.options.asyncHooks ? ', async hooks on from the start (--async-hooks)' : ''}`,
    ...(results.baseline
      ? [
          `baseline ${results.baseline.ref} = ${results.baseline.commit.slice(0, 12)} ` +
            `${results.baseline.subject.slice(0, 70)}`,
        ]
      : []),
    `took ${fixed(results.seconds / 60, 1)} min (${results.startedAt} → ${results.finishedAt})`,
  ].join('\n');
}

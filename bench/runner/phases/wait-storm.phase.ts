import { randomBytes } from 'node:crypto';
import { Agent } from 'node:http';
import {
  WAIT_STORM_MAX_SECONDS,
  WAIT_STORM_POLL_SECONDS,
  WAIT_STORM_PREFIXES,
} from '../../app/wait-storm.routes';
import type { WaitStormWakeUps } from '../../app/wait-storm.routes';
import { wakeUpChannelOf } from '../../../lib/storage/typeorm/typeorm-wake-ups';
import { wakeTokenOf } from '../../../lib/waiting/wake-token';
import type { BenchDatabase, BenchListener } from '../bench-database';
import type { HttpAnswer } from '../http-request';
import { httpRequest } from '../http-request';
import type { LatencySummary } from '../latency-stats';
import { median, summarizeLatencies } from '../latency-stats';
import type { BenchServer } from '../server-process';

/** Settings of the wait-storm phase (`--wait-requests`, `--wait-rounds`, `--wait-hold`). */
export interface WaitStormSettings {
  /** Requests per key, the first included. */
  requests: number;
  /** Keys per route, one storm each. */
  rounds: number;
  /** How long the handler takes (`?holdMs=`). */
  holdMs: number;
}

/** Where a request was sent: the instance that runs the first request, or the other one. */
export type WaitStormInstance = 'same' | 'other';

/** Wake-up latencies of the waiters: on the first request's instance, on the other, and all. */
export interface WaitStormLatencies {
  same: LatencySummary;
  other: LatencySummary;
  all: LatencySummary;
}

/** One key's storm. */
export interface WaitStormRound {
  /** Rows the handler inserted for this key (its executions). */
  executions: number;
  /** Statuses of every request of the key, the first included. */
  statuses: Record<string, number>;
  /** Waiters answered with `Preference-Applied` (they slept at least once). */
  waited: number;
  /** From the completion's write to its commit as the runner's listener saw it. */
  commitAfterWriteMs: number;
  /** From the commit (as the runner's listener saw it) to the first request's answer. */
  firstAnswerAfterCommitMs: number;
  /** p99 of this round's waiters, from the commit. */
  p99: number;
}

/** What the storms of one route measured, over all rounds. */
export interface WaitStormResult {
  wakeUps: WaitStormWakeUps;
  path: string;
  /** The route's `wait.pollIntervalSeconds`. */
  pollIntervalSeconds: number;
  holdMs: number;
  /** Requests per key, the first included. */
  requests: number;
  /** Statuses of every request of every round, by the instance it was sent to. */
  statuses: Record<WaitStormInstance, Record<string, number>>;
  /** Waiters (all rounds) that slept, by instance. */
  waited: Record<WaitStormInstance, number>;
  /** Waiters (all rounds) answered without sleeping: they came after the completion. */
  notWaited: number;
  /**
   * From the completion's commit to each waiter's answer: the commit's time is when the
   * runner's own listening connection received the completion's notification (sent at the
   * commit; the wait routes announce on both stores).
   */
  fromCommit: WaitStormLatencies;
  /**
   * From the completion's write (`updated_at`, set by `clock_timestamp()` in the completing
   * statement, before its commit and WAL flush) to each waiter's answer.
   */
  fromWrite: WaitStormLatencies;
  /** From the first request's answer at the runner to each waiter's answer. */
  fromFirstAnswer: WaitStormLatencies;
  rounds: WaitStormRound[];
}

/** The phase's results on one adapter. */
export interface WaitStormPhaseResult {
  /** The runner's clock against PostgreSQL's (both read on this machine); not corrected for. */
  clock: { offsetMs: number; uncertaintyMs: number };
  /**
   * Sessions listening on the wake-up channel once the warm-up ran: one per server for the
   * `LISTEN/NOTIFY` route's store (2 expected; fewer means a server polls instead).
   */
  listening: number;
  paths: WaitStormResult[];
}

/** Two servers of one idempotency configuration: A runs the first request, B only waits. */
export type WaitStormPair = [BenchServer, BenchServer];

/**
 * The phase's servers, on one database: a pair per configuration (`BENCH_IDEMPOTENCY`); the
 * wake-up floor (no library) runs on the `notify` pair.
 */
export interface WaitStormServers {
  notify: WaitStormPair;
  poll: WaitStormPair;
}

/** A pair's servers with connections opened to each. */
interface OpenPair {
  servers: WaitStormPair;
  agents: [Agent, Agent];
}

/** One request of a storm and its answer. */
interface Sent {
  instance: WaitStormInstance;
  answer: HttpAnswer;
}

/**
 * One key's storm: its answers, and when (`performance.now()`) its completion was written, seen
 * committed by the runner's listener, and answered to the first request.
 */
interface Storm {
  sent: Sent[];
  executions: number;
  writtenAt: number;
  committedAt: number;
  firstAnsweredAt: number;
}

/** Where a latency is taken from. */
type Reference = 'commit' | 'write' | 'first-answer';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Connections opened beforehand (a GET /health each), so the storm does not measure TCP accepts. */
async function openAgent(server: BenchServer, sockets: number): Promise<Agent> {
  const agent = new Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });
  await Promise.all(
    Array.from({ length: sockets }, () =>
      httpRequest(server.url, { method: 'GET', path: '/health', agent }),
    ),
  );
  return agent;
}

/** Waits until the record of `key` exists (the first request's claim is in). */
async function claimed(db: BenchDatabase, key: string, path: string): Promise<void> {
  const until = performance.now() + 5000;
  while (!(await db.record(key))) {
    if (performance.now() > until)
      throw new Error(`${path}: no record of the first request's key after 5 s`);
    await sleep(1);
  }
}

/**
 * One key's storm: the first request to instance A; once its claim is in the record table,
 * `requests - 1` waiters with `Prefer: wait=<max>`, alternately to B and A, all at once. The
 * completion's write is read from the record afterwards, its commit from the runner's listener.
 */
async function stormOnce(
  { servers: [a, b], agents }: OpenPair,
  db: BenchDatabase,
  listener: BenchListener,
  wakeUps: WaitStormWakeUps,
  settings: WaitStormSettings,
): Promise<Storm> {
  const prefix = WAIT_STORM_PREFIXES[wakeUps];
  const key = `wait-${wakeUps}-${randomBytes(8).toString('hex')}`;
  const path = `/${prefix}?holdMs=${settings.holdMs}`;
  const call = (agent: Agent) => ({
    method: 'POST' as const,
    path,
    body: { amount: 100, note: key },
    headers: { 'idempotency-key': key, prefer: `wait=${WAIT_STORM_MAX_SECONDS}` },
    agent,
  });
  const firstAnswer = httpRequest(a.url, call(agents[0]));
  await claimed(db, key, path);
  const waiters = Array.from({ length: settings.requests - 1 }, (_, i) => {
    const instance: WaitStormInstance = i % 2 === 0 ? 'other' : 'same';
    const server = instance === 'same' ? a : b;
    return httpRequest(server.url, call(agents[instance === 'same' ? 0 : 1])).then(
      (answer): Sent => ({ instance, answer }),
    );
  });
  const [first, sent] = await Promise.all([firstAnswer, Promise.all(waiters)]);
  const record = await db.record(key);
  if (record?.status !== 'completed') {
    throw new Error(`${path}: the record of the storm's key is ${record?.status ?? 'missing'}`);
  }
  // The bench app's scope is '' (no user).
  const token = wakeTokenOf('', key);
  for (let tries = 0; !listener.arrivals.has(token) && tries < 100; tries++) await sleep(10);
  const committedAt = listener.arrivals.get(token);
  if (committedAt === undefined) throw new Error(`${path}: no notification of the completion`);
  listener.arrivals.delete(token);
  return {
    sent: [{ instance: 'same', answer: first }, ...sent],
    executions: await db.countEntriesNoted(key),
    writtenAt: record.updatedAtMs - performance.timeOrigin,
    committedAt,
    firstAnsweredAt: first.endedAt,
  };
}

/**
 * The same-key storm with `Prefer: wait`: per route (`/wait-notify`, woken by `LISTEN/NOTIFY`;
 * `/wait-poll`, `typeOrmStore({ wakeUps: 'poll' })`), `rounds` keys of `requests` requests each,
 * on a pair of servers of the same adapter per route, in the route's idempotency configuration
 * (the floor's on the `notify` pair), all on one database. The first request of a key runs its
 * handler (`holdMs`) on server A; its duplicates, sent once its claim is in, wait on A (woken in
 * the process) and on B (woken by a notification, or by their poll). Every waiter's latency is
 * taken from the completion's commit, as a listening connection of the runner's own sees it (the
 * completion's notification arrives), to its answer at the runner; and, for comparison, from the
 * completion's write (`updated_at`, before the commit) and from the first request's answer. A
 * warm-up storm on each route opens the servers' listening connections first. The routes
 * alternate which goes first from one round to the next.
 *
 * @param log - progress lines
 */
export async function runWaitStormPhase(
  servers: WaitStormServers,
  db: BenchDatabase,
  settings: WaitStormSettings,
  log: (line: string) => void,
): Promise<WaitStormPhaseResult> {
  await db.reset();
  const listener = await db.listen(wakeUpChannelOf('idempotency_records'));
  const perServer = Math.ceil(settings.requests / 2) + 1;
  const open = async (pair: WaitStormPair): Promise<OpenPair> => ({
    servers: pair,
    agents: [await openAgent(pair[0], perServer), await openAgent(pair[1], perServer)],
  });
  const notify = await open(servers.notify);
  const pairs: Record<WaitStormWakeUps, OpenPair> = {
    notify,
    poll: await open(servers.poll),
    floor: notify,
  };
  try {
    const routes: WaitStormWakeUps[] = ['notify', 'poll', 'floor'];
    // Warm-up (not measured): the first request of a route that may wait opens its store's
    // listening connection, on each server.
    for (const wakeUps of routes) {
      await stormOnce(pairs[wakeUps], db, listener, wakeUps, {
        ...settings,
        requests: Math.min(settings.requests, 20),
      });
    }
    let listening = await db.listeningSessions();
    for (let tries = 0; listening < 2 && tries < 50; tries++) {
      await sleep(100);
      listening = await db.listeningSessions();
    }
    const clock = await db.clockOffset();
    const storms = new Map<WaitStormWakeUps, Storm[]>(routes.map((wakeUps) => [wakeUps, []]));
    for (let round = 1; round <= settings.rounds; round++) {
      const order = round % 2 === 1 ? routes : [...routes].reverse();
      for (const wakeUps of order) {
        const storm = await stormOnce(pairs[wakeUps], db, listener, wakeUps, settings);
        storms.get(wakeUps)!.push(storm);
        const waits = summarizeLatencies(wakeUpsOf(storm, 'commit').map((w) => w.ms));
        log(
          `  ${servers.notify[0].adapter} wait storm /${WAIT_STORM_PREFIXES[wakeUps]} (round ${round}): ` +
            `${storm.executions} execution(s), ${JSON.stringify(countStatuses(storm.sent))}, ` +
            `${waits.count} waited, from the commit p50 ${waits.p50.toFixed(2)} ms ` +
            `p99 ${waits.p99.toFixed(2)} ms`,
        );
      }
    }
    return {
      clock,
      listening,
      paths: routes.map((wakeUps) => summarize(wakeUps, storms.get(wakeUps)!, settings)),
    };
  } finally {
    for (const { agents } of [notify, pairs.poll]) for (const agent of agents) agent.destroy();
    await listener.close();
    await db.reset();
  }
}

function countStatuses(sent: readonly Sent[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { answer } of sent) counts[answer.status] = (counts[answer.status] ?? 0) + 1;
  return counts;
}

/**
 * The waiters of a storm that slept (their answer carries `Preference-Applied`), with the time
 * from the completion's write, or from the first request's answer, to their answer.
 */
function wakeUpsOf(storm: Storm, from: Reference): { instance: WaitStormInstance; ms: number }[] {
  const start =
    from === 'commit'
      ? storm.committedAt
      : from === 'write'
        ? storm.writtenAt
        : storm.firstAnsweredAt;
  return storm.sent
    .slice(1)
    .filter(({ answer }) => answer.headers['preference-applied'] !== undefined)
    .map(({ instance, answer }) => ({ instance, ms: answer.endedAt - start }));
}

function latencies(values: { instance: WaitStormInstance; ms: number }[]): WaitStormLatencies {
  const of = (instance?: WaitStormInstance) =>
    summarizeLatencies(
      values.filter((v) => instance === undefined || v.instance === instance).map((v) => v.ms),
    );
  return { same: of('same'), other: of('other'), all: of() };
}

function summarize(
  wakeUps: WaitStormWakeUps,
  storms: Storm[],
  settings: WaitStormSettings,
): WaitStormResult {
  const statuses: WaitStormResult['statuses'] = { same: {}, other: {} };
  for (const storm of storms) {
    for (const { instance, answer } of storm.sent) {
      statuses[instance][answer.status] = (statuses[instance][answer.status] ?? 0) + 1;
    }
  }
  const over = (from: Reference) => storms.flatMap((storm) => wakeUpsOf(storm, from));
  const fromCommit = over('commit');
  const waited = (instance: WaitStormInstance) =>
    fromCommit.filter((w) => w.instance === instance).length;
  return {
    wakeUps,
    path: `/${WAIT_STORM_PREFIXES[wakeUps]}`,
    pollIntervalSeconds: WAIT_STORM_POLL_SECONDS,
    holdMs: settings.holdMs,
    requests: settings.requests,
    statuses,
    waited: { same: waited('same'), other: waited('other') },
    notWaited: storms.length * (settings.requests - 1) - fromCommit.length,
    fromCommit: latencies(fromCommit),
    fromWrite: latencies(over('write')),
    fromFirstAnswer: latencies(over('first-answer')),
    rounds: storms.map((storm) => ({
      executions: storm.executions,
      statuses: countStatuses(storm.sent),
      waited: wakeUpsOf(storm, 'commit').length,
      commitAfterWriteMs: storm.committedAt - storm.writtenAt,
      firstAnswerAfterCommitMs: storm.firstAnsweredAt - storm.committedAt,
      p99: summarizeLatencies(wakeUpsOf(storm, 'commit').map((w) => w.ms)).p99,
    })),
  };
}

/** The median over rounds of `field`. */
export function medianOverRounds(
  result: WaitStormResult,
  field: 'commitAfterWriteMs' | 'firstAnswerAfterCommitMs',
): number {
  return median(result.rounds.map((round) => round[field]));
}

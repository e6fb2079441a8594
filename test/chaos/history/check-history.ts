import type {
  AnswerEvent,
  HandlerStartEvent,
  HistoryEvent,
  InstanceKillEvent,
  LockLostEvent,
} from './history-event';

/** A broken promise, with the events that prove it. */
export interface Violation {
  rule: 'one-effect' | 'replay-equal' | 'no-contradiction' | 'settles' | 'jobs' | 'refusals';
  subject: string;
  message: string;
  events: HistoryEvent[];
}

export interface CheckOptions {
  /** Lease plus completer interval: how long a key may stay outstanding with nothing running. */
  settleBoundMs: number;
}

/** Retryable statuses: the answer is not final, a client retries (as `isFinal` in chaos-client). */
const NOT_FINAL = new Set([408, 409, 425, 429]);

/** Whether an answer is the route's own, final one: what the library stores and replays. */
export function isStoredAnswer(answer: AnswerEvent): boolean {
  return (
    answer.status !== undefined &&
    answer.status < 500 &&
    !NOT_FINAL.has(answer.status) &&
    !answer.code?.startsWith('idempotency_')
  );
}

function groupBy<T>(items: T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    groups.set(key, [...(groups.get(key) ?? []), item]);
  }
  return groups;
}

function ofType<T extends HistoryEvent['type']>(history: HistoryEvent[], ...types: T[]) {
  return history.filter((event) => (types as string[]).includes(event.type)) as Extract<
    HistoryEvent,
    { type: T }
  >[];
}

/** At most one provider charge per derived key, at most one local effect per key. */
function checkEffects(history: HistoryEvent[]): Violation[] {
  const charges = ofType(history, 'provider-charge').filter((charge) => charge.created);
  const keyed = charges.filter((charge) => charge.key !== undefined);
  const effects = ofType(history, 'effect');
  return [
    ...[...groupBy(charges, (charge) => charge.derivedKey)].map(([key, events]) => ({
      key,
      events,
      what: 'provider charges under one derived key',
    })),
    ...[...groupBy(keyed, (charge) => charge.key!)].map(([key, events]) => ({
      key,
      events,
      what: 'provider charges under one request key',
    })),
    ...[...groupBy(effects, (effect) => effect.key)].map(([key, events]) => ({
      key,
      events,
      what: 'effects under one key',
    })),
  ]
    .filter(({ events }) => events.length > 1)
    .map(({ key, events, what }) => ({
      rule: 'one-effect' as const,
      subject: key,
      message: `${events.length} ${what}`,
      events,
    }));
}

/** The first final answer any client saw for each key. */
function firstFinals(answers: AnswerEvent[]): Map<string, AnswerEvent> {
  const first = new Map<string, AnswerEvent>();
  for (const answer of [...answers].sort((a, b) => a.at - b.at)) {
    if (isStoredAnswer(answer) && !first.has(answer.key)) first.set(answer.key, answer);
  }
  return first;
}

/** Every later final answer equals the first, byte for byte. */
function checkReplays(answers: AnswerEvent[], first: Map<string, AnswerEvent>): Violation[] {
  return answers
    .filter((answer) => isStoredAnswer(answer) && first.get(answer.key) !== answer)
    .filter((answer) => answer.answerHash !== first.get(answer.key)!.answerHash)
    .map((answer) => ({
      rule: 'replay-equal' as const,
      subject: answer.key,
      message: `answer ${answer.status} differs from the first final answer`,
      events: [first.get(answer.key)!, answer],
    }));
}

/**
 * Whether a run was a stale owner's: one that claimed the key, stopped (SIGSTOP) past its lease
 * while another request took the key over and answered, and went on. Nothing can keep it from
 * starting its handler late, but the library found its lease lost (`lock_lost`, on the run's
 * instance, for the key, after the run began), so its completion changed nothing; its effects
 * are checked by `one-effect` and its client's answer by `replay-equal`.
 */
function fenced(start: HandlerStartEvent, lockLost: LockLostEvent[]): boolean {
  return lockLost.some(
    (lost) => lost.key === start.key && lost.instance === start.instance && lost.at >= start.at,
  );
}

/**
 * Once a final answer was seen, an attempt begun later with the same body never gets 422, and no
 * handler runs again for the key (with the same body that is a lost record; with another, a
 * payload that should have been refused), but for a stale owner's fenced run.
 */
function checkContradictions(
  history: HistoryEvent[],
  answers: AnswerEvent[],
  first: Map<string, AnswerEvent>,
): Violation[] {
  const violations: Violation[] = [];
  for (const answer of answers) {
    const final = first.get(answer.key);
    if (!final || answer.startedAt <= final.at || answer.code !== 'idempotency_key_reused')
      continue;
    if (answer.requestHash !== final.requestHash) continue;
    violations.push({
      rule: 'no-contradiction',
      subject: answer.key,
      message: 'the same body got 422 although a final answer was stored',
      events: [final, answer],
    });
  }
  const lockLost = ofType(history, 'lock-lost');
  for (const start of ofType(history, 'handler-start')) {
    const final = first.get(start.key);
    if (!final || start.at <= final.at || fenced(start, lockLost)) continue;
    const body = start.requestHash === final.requestHash ? 'the same body' : 'another body';
    violations.push({
      rule: 'no-contradiction',
      subject: start.key,
      message: `the handler ran again with ${body} after a final answer was seen`,
      events: [final, start],
    });
  }
  return violations;
}

/** Whether a handler run was still going at `at`: not ended, its instance not killed since. */
function running(
  start: HandlerStartEvent,
  at: number,
  ends: Map<string, number>,
  kills: InstanceKillEvent[],
): boolean {
  if (start.at > at) return false;
  const end = ends.get(start.run);
  if (end !== undefined && end <= at) return false;
  return !kills.some(
    (kill) => kill.instance === start.instance && kill.at >= start.at && kill.at <= at,
  );
}

/**
 * Every key settles within the bound: it is not refused as outstanding longer than the bound after
 * its last handler stopped, and each key has a final answer when the history ends.
 */
function checkSettling(
  history: HistoryEvent[],
  answers: AnswerEvent[],
  first: Map<string, AnswerEvent>,
  options: CheckOptions,
): Violation[] {
  const starts = groupBy(ofType(history, 'handler-start'), (start) => start.key);
  const ends = new Map(ofType(history, 'handler-end').map((end) => [end.run, end.at]));
  const kills = ofType(history, 'kill');
  const stoppedAt = (start: HandlerStartEvent) =>
    Math.min(
      ends.get(start.run) ?? Infinity,
      ...kills.filter((k) => k.instance === start.instance && k.at >= start.at).map((k) => k.at),
    );
  const violations: Violation[] = [];
  for (const answer of answers.filter((a) => a.code === 'idempotency_key_in_use')) {
    const runs = (starts.get(answer.key) ?? []).filter((start) => start.at <= answer.startedAt);
    if (runs.length === 0 || runs.some((run) => running(run, answer.startedAt, ends, kills)))
      continue;
    const last = Math.max(...runs.map(stoppedAt));
    if (answer.startedAt - last <= options.settleBoundMs) continue;
    violations.push({
      rule: 'settles',
      subject: answer.key,
      message: `refused as outstanding ${answer.startedAt - last} ms after its last handler stopped`,
      events: [...runs, answer],
    });
  }
  for (const [key, keyed] of groupBy(answers, (answer) => answer.key)) {
    if (first.has(key)) continue;
    violations.push({
      rule: 'settles',
      subject: key,
      message: 'no client ever saw a final answer',
      events: keyed,
    });
  }
  return violations;
}

/** Every staged job delivered at least once, and its effect applied exactly once. */
function checkJobs(history: HistoryEvent[]): Violation[] {
  const byJob = groupBy(ofType(history, 'job-staged', 'job-delivery', 'job-effect'), (e) => e.job);
  const violations: Violation[] = [];
  for (const [job, events] of byJob) {
    const count = (type: string) => events.filter((event) => event.type === type).length;
    if (count('job-staged') === 0) continue;
    const problem =
      count('job-delivery') === 0
        ? 'a staged job was never delivered'
        : count('job-effect') !== 1
          ? `a staged job's effect was applied ${count('job-effect')} times`
          : undefined;
    if (problem) violations.push({ rule: 'jobs', subject: job, message: problem, events });
  }
  return violations;
}

/** The library's refusals that ask the client to come back: each must say when. */
const RETRY_LATER = new Set([
  'idempotency_key_in_use',
  'idempotency_store_unavailable',
  'idempotency_retry_later',
]);

/**
 * Every refusal is one a client can act on: a 409 is `idempotency_key_in_use` problem+json, and
 * each refusal that asks for a retry (in use, store unavailable, retry later) has a `Retry-After`
 * of whole seconds, so clients back off instead of hammering a key or a database that is down.
 */
function checkRefusals(answers: AnswerEvent[]): Violation[] {
  const violations: Violation[] = [];
  for (const answer of answers) {
    const problem =
      answer.status === 409 && answer.code !== 'idempotency_key_in_use'
        ? `409 that is not idempotency_key_in_use problem+json (code ${answer.code})`
        : RETRY_LATER.has(answer.code ?? '') && !/^\d+$/.test(answer.retryAfter ?? '')
          ? `${answer.status} ${answer.code} without a Retry-After of whole seconds (${answer.retryAfter})`
          : undefined;
    if (problem)
      violations.push({
        rule: 'refusals',
        subject: answer.key,
        message: problem,
        events: [answer],
      });
  }
  return violations;
}

/** Reads a run's history and returns every violation of the promise, with its evidence. */
export function checkHistory(history: HistoryEvent[], options: CheckOptions): Violation[] {
  const answers = ofType(history, 'answer');
  const first = firstFinals(answers);
  return [
    ...checkEffects(history),
    ...checkReplays(answers, first),
    ...checkContradictions(history, answers, first),
    ...checkSettling(history, answers, first, options),
    ...checkJobs(history),
    ...checkRefusals(answers),
  ];
}

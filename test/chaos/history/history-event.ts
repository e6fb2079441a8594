/**
 * One line of a run's history. Clients, the apps' handlers, the fake provider and the job handler
 * each append what they saw; `checkHistory` reads the whole run. Times are milliseconds on one
 * clock (the harness's), so events from different processes can be ordered.
 */
export type HistoryEvent =
  | AnswerEvent
  | HandlerStartEvent
  | HandlerEndEvent
  | InstanceKillEvent
  | ProviderChargeEvent
  | EffectEvent
  | NotStoredEvent
  | LockLostEvent
  | JobEvent
  | FaultEvent;

/** A client's attempt and what came back; `status` is undefined when the transport failed. */
export interface AnswerEvent {
  type: 'answer';
  key: string;
  client: string;
  startedAt: number;
  at: number;
  /** SHA-256 of the request body the client sent. */
  requestHash: string;
  status?: number;
  /** The problem+json `code`, when the answer was one. */
  code?: string;
  /** A 5xx without a `code` (an error nothing mapped): the start of its body, for the report. */
  uncoded?: string;
  replayed: boolean;
  /** The `Retry-After` header, when the answer had one. */
  retryAfter?: string;
  /** SHA-256 of status, content type and body as the client received them. */
  answerHash?: string;
}

/** A handler began running for a key (`run` pairs it with its end). */
export interface HandlerStartEvent {
  type: 'handler-start';
  key: string;
  run: string;
  instance: string;
  requestHash: string;
  at: number;
}

export interface HandlerEndEvent {
  type: 'handler-end';
  run: string;
  at: number;
}

/** An app instance was killed: its running handlers ended there. */
export interface InstanceKillEvent {
  type: 'kill';
  instance: string;
  at: number;
}

/**
 * The provider was called with a derived key; `created` when that call made a new charge. `key`
 * is the request's key, when the caller knows it: two charges for one request under two derived
 * keys (a record lost and made anew with another id) are then found too.
 */
export interface ProviderChargeEvent {
  type: 'provider-charge';
  derivedKey: string;
  key?: string;
  created: boolean;
  at: number;
}

/** A local handler's effect (a row it wrote) for a key, as read back from the database. */
export interface EffectEvent {
  type: 'effect';
  key: string;
  at: number;
}

/**
 * The library said a response went out without being stored (its `executed` event with
 * `stored: false`): a retry after the lease runs the handler again. Evidence, not a verdict.
 */
export interface NotStoredEvent {
  type: 'not-stored';
  key: string;
  instance: string;
  status: number;
  at: number;
}

/**
 * The library found that another request had taken the key's lease over from this instance's
 * run (its `lock_lost` event): the run was a stale owner's, whose completion changed nothing.
 */
export interface LockLostEvent {
  type: 'lock-lost';
  key: string;
  instance: string;
  at: number;
}

/** A staged job: committed with its request, delivered to its handler, its effect applied. */
export interface JobEvent {
  type: 'job-staged' | 'job-delivery' | 'job-effect';
  job: string;
  at: number;
}

/**
 * A fault the run injected: `kind` names it (`sigkill`, `sigstop`, `db cut`, `proxy drop`, …),
 * `detail` says where (the instance, the key, how many connections).
 */
export interface FaultEvent {
  type: 'fault';
  kind: string;
  detail?: string;
  at: number;
}

/** How an app instance (a child process) prefixes the history lines it prints on stdout. */
export const HISTORY_LINE = 'HISTORY ';

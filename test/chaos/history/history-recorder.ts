import { createHash } from 'node:crypto';
import type { AnswerEvent, FaultEvent, HistoryEvent } from './history-event';

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** What a client got back, in the shape the recorder reads. */
export interface ClientAnswer {
  status?: number;
  contentType?: string;
  replayed?: boolean;
  retryAfter?: string;
  body?: Buffer | string;
}

/** Collects a run's events on the harness's clock, in the order they happened. */
export class HistoryRecorder {
  readonly events: HistoryEvent[] = [];
  private readonly started = Date.now();
  private runs = 0;

  now(): number {
    return Date.now() - this.started;
  }

  /** An epoch time (another process's `Date.now()`, same machine) on this recorder's clock. */
  sinceStart(epochMs: number): number {
    return epochMs - this.started;
  }

  /** Records a fault the run injected. */
  fault(kind: string, detail?: string): FaultEvent {
    const event: FaultEvent = { type: 'fault', kind, detail, at: this.now() };
    this.events.push(event);
    return event;
  }

  /** Records one client attempt: when it began, what it sent and what came back. */
  answer(
    fields: { key: string; client: string; startedAt: number; request: unknown },
    got: ClientAnswer,
  ) {
    const body = got.body === undefined ? undefined : Buffer.from(got.body);
    let code: string | undefined;
    if (got.contentType?.startsWith('application/problem+json') && body) {
      code = JSON.parse(body.toString('utf8')).code;
    }
    const event: AnswerEvent = {
      type: 'answer',
      key: fields.key,
      client: fields.client,
      startedAt: fields.startedAt,
      at: this.now(),
      requestHash: sha256(JSON.stringify(fields.request)),
      status: got.status,
      code,
      replayed: got.replayed ?? false,
      ...(got.retryAfter === undefined ? {} : { retryAfter: got.retryAfter }),
      uncoded:
        got.status !== undefined && got.status >= 500 && !code
          ? (body?.toString('utf8').slice(0, 200) ?? '')
          : undefined,
      answerHash:
        got.status === undefined
          ? undefined
          : sha256(`${got.status}\n${got.contentType ?? ''}\n${body?.toString('base64') ?? ''}`),
    };
    this.events.push(event);
    return event;
  }

  /** Records a handler's start; call the returned function when it ends. */
  handlerStart(key: string, instance: string, request: unknown): () => void {
    const run = `run-${++this.runs}`;
    const requestHash = sha256(JSON.stringify(request));
    this.events.push({ type: 'handler-start', key, run, instance, requestHash, at: this.now() });
    return () => this.events.push({ type: 'handler-end', run, at: this.now() });
  }

  /** The library reported that it could not store the response it sent for `key`. */
  notStored(key: string, instance: string, status: number): void {
    this.events.push({ type: 'not-stored', key, instance, status, at: this.now() });
  }

  providerCharge(derivedKey: string, created: boolean, key?: string): void {
    this.events.push({ type: 'provider-charge', derivedKey, key, created, at: this.now() });
  }
}

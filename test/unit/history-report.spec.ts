import type { AnswerEvent } from '../chaos/history/history-event';
import { HistoryRecorder } from '../chaos/history/history-recorder';
import { countStatuses, formatSummary } from '../chaos/history/history-report';
import { newCounts } from '../chaos/history/history-workload';

describe('the history report', () => {
  it('counts a 5xx without a problem+json code apart, and lists it with its body', () => {
    const recorder = new HistoryRecorder();
    const sent = { key: 'k1', client: 'first', startedAt: 0, request: { amount: 1 } };
    recorder.answer(sent, {
      status: 500,
      contentType: 'application/json; charset=utf-8',
      body: '{"statusCode":500,"message":"Internal server error"}',
    });
    recorder.answer(sent, {
      status: 503,
      contentType: 'application/problem+json',
      body: '{"code":"idempotency_store_unavailable"}',
    });
    recorder.answer(sent, { status: 201, contentType: 'application/json', body: '{}' });
    const history = recorder.events;

    expect((history[0] as AnswerEvent).uncoded).toBe(
      '{"statusCode":500,"message":"Internal server error"}',
    );
    expect(countStatuses(history)).toEqual({
      '500(no code)': 1,
      '503(idempotency_store_unavailable)': 1,
      '201': 1,
    });
    const summary = formatSummary({
      replication: 'sync',
      counts: newCounts(),
      faults: {},
      statuses: countStatuses(history),
      violations: [],
      history,
      notStored: new Set(),
      durationMs: 0,
    });
    expect(summary).toContain(
      'no code:      1 5xx answers without a problem+json code (an error nothing mapped',
    );
    expect(summary).toContain(
      '    k1 (first): 500 {"statusCode":500,"message":"Internal server error"}',
    );
  });
});

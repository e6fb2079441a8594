/**
 * `isDatabaseUnavailable` (exported; used by the library for steps of operations in phases, and
 * by the sample app for its own 503 `database_unavailable`) holds only for errors that mean the
 * database could not be reached — including a query on a query runner TypeORM released because
 * its connection failed mid-transaction (seen in the chaos outage scenario with payments in
 * phases), a store call that ran out of time and a commit its synchronous standby did not confirm.
 */
import { connect } from 'node:net';
import {
  QueryFailedError,
  QueryRunnerAlreadyReleasedError,
  QueryRunnerProviderAlreadyReleasedError,
} from 'typeorm';
import { IdempotencyCommitUnconfirmedError } from '../../lib/storage/commit-unconfirmed.error';
import { IdempotencyStoreTimeoutError, isDatabaseUnavailable } from '../../lib/storage/typeorm';

describe('isDatabaseUnavailable', () => {
  it('recognises a cut connection, a refused one and a runner released after its connection failed', () => {
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(
      isDatabaseUnavailable(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })),
    ).toBe(true);
    // A query on a pg client whose connection failed (or was closed) before the query was sent.
    const notQueryable = new Error(
      'Client has encountered a connection error and is not queryable',
    );
    expect(isDatabaseUnavailable(notQueryable)).toBe(true);
    expect(isDatabaseUnavailable(new QueryFailedError('SELECT 1', [], notQueryable))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Client was closed and is not queryable'))).toBe(true);
    expect(isDatabaseUnavailable(new QueryRunnerAlreadyReleasedError())).toBe(true);
    expect(isDatabaseUnavailable(new QueryRunnerProviderAlreadyReleasedError())).toBe(true);
    expect(
      isDatabaseUnavailable(
        new IdempotencyStoreTimeoutError('claim', 5000, 'PostgreSQL to answer'),
      ),
    ).toBe(true);
    // A commit a stalled synchronous standby did not confirm: a step answers 503, as for a timeout.
    const unconfirmed = new IdempotencyCommitUnconfirmedError('commit', 'canceling wait');
    expect(isDatabaseUnavailable(unconfirmed)).toBe(true);
  });

  it("recognises a socket's error made in Node's own realm (under Jest, not an `instanceof Error` here)", async () => {
    const reset: unknown = await new Promise((resolve) =>
      connect(1, '127.0.0.1').on('error', resolve),
    );
    expect(isDatabaseUnavailable(reset)).toBe(true);
  });

  it('does not take a failed statement for an outage', () => {
    const syntax = Object.assign(new Error('syntax error'), { code: '42601', severity: 'ERROR' });
    expect(isDatabaseUnavailable(new QueryFailedError('SELEC 1', [], syntax))).toBe(false);
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false);
    expect(isDatabaseUnavailable(new Error('this value is not queryable'))).toBe(false);
  });
});

/**
 * The sample app answers 503 `database_unavailable` only for errors that mean the database could
 * not be reached — including a query on a query runner TypeORM released because its connection
 * failed mid-transaction (seen in the chaos outage scenario with payments in phases).
 */
import { QueryFailedError, QueryRunnerAlreadyReleasedError } from 'typeorm';
import { isDatabaseUnavailable } from '../../sample-app/database/database-unavailable';

describe('isDatabaseUnavailable', () => {
  it('recognises a cut connection, a refused one and a runner released after its connection failed', () => {
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(
      isDatabaseUnavailable(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })),
    ).toBe(true);
    expect(isDatabaseUnavailable(new QueryRunnerAlreadyReleasedError())).toBe(true);
  });

  it('does not take a failed statement for an outage', () => {
    const syntax = Object.assign(new Error('syntax error'), { code: '42601', severity: 'ERROR' });
    expect(isDatabaseUnavailable(new QueryFailedError('SELEC 1', [], syntax))).toBe(false);
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false);
  });
});

/**
 * The errors table of docs/errors.md ("## Codes") lists every error code the library answers
 * with, with the status and title the code sends. The library's list of codes is checked against
 * `IdempotencyErrorCode` by the compiler, so a new code cannot be left out of it (nor, then, out
 * of the table).
 */
import { DEFAULT_IDEMPOTENCY_OPTIONS, IdempotencyProblemException } from '../../lib';
import { IDEMPOTENCY_ERROR_CODES } from '../../lib/openapi/idempotency-openapi';
import { namedRows } from '../shared/markdown';

/** Every code, as the library keeps them (a Record over the union, so none is left out). */
const CODES = IDEMPOTENCY_ERROR_CODES;

/** The first table under "## Codes" in docs/errors.md: code → its status and title. */
function errorsTable(): Map<string, { status: string; title: string }> {
  const rows = new Map<string, { status: string; title: string }>();
  for (const [code, [status, title]] of namedRows('docs/errors.md', '## Codes')) {
    rows.set(code, { status, title });
  }
  return rows;
}

describe('the errors table of docs/errors.md', () => {
  let table: Map<string, { status: string; title: string }>;
  beforeAll(() => {
    table = errorsTable();
  });

  it('has one row per error code and no row for anything else', () => {
    expect([...table.keys()].sort()).toEqual([...CODES].sort());
  });

  it.each(CODES)('gives the status and title %s is sent with', (code) => {
    // The key's titles name the route's header: the table shows them with the default one.
    const { header } = DEFAULT_IDEMPOTENCY_OPTIONS.request;
    const exception =
      code === 'idempotency_key_missing'
        ? IdempotencyProblemException.keyMissing(header)
        : code === 'idempotency_key_invalid'
          ? IdempotencyProblemException.keyInvalid(header, '')
          : new IdempotencyProblemException(code, '');
    const problem = exception.toProblem('');
    expect(table.get(code)).toEqual({ status: String(problem.status), title: problem.title });
  });
});

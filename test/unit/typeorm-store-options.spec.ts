/**
 * `typeOrmStore()` checks its options when it is called (at module definition), naming the
 * option and the fix; values read from the environment as strings are taken where unambiguous.
 */
import { DEFAULT_TYPEORM_STORE_OPTIONS, typeOrmStore } from '../../lib/storage/typeorm';
import { IdempotencyConfigurationError } from '../../lib';

function refusal(options: Parameters<typeof typeOrmStore>[0]): string {
  try {
    typeOrmStore(options);
  } catch (error) {
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    return (error as Error).message;
  }
  throw new Error('typeOrmStore() accepted the options');
}

describe('typeOrmStore() options', () => {
  it('has one frozen defaults object', () => {
    expect(DEFAULT_TYPEORM_STORE_OPTIONS).toEqual({
      tableName: 'idempotency_records',
      timeoutSeconds: 5,
      preparedStatements: true,
      wakeUps: 'auto',
    });
    expect(Object.isFrozen(DEFAULT_TYPEORM_STORE_OPTIONS)).toBe(true);
  });

  it('accepts every default, a schema-qualified table and environment strings', () => {
    expect(typeof typeOrmStore().create).toBe('function');
    expect(() =>
      typeOrmStore({
        tableName: 'billing.idempotency_records',
        dataSource: 'billing',
        timeoutSeconds: ' 0.25 ' as unknown as number,
        preparedStatements: 'False' as unknown as boolean,
      }),
    ).not.toThrow();
  });

  it.each<[string, Parameters<typeof typeOrmStore>[0], RegExp]>([
    ['a table name with a dash', { tableName: 'idempotency-records' }, /SQL identifier/],
    ['an upper-case table name', { tableName: 'Records' }, /lower-case/],
    ['SQL in the table name', { tableName: 'x; DROP TABLE y' }, /SQL identifier/],
    ['a three-part table name', { tableName: 'a.b.c' }, /schema-qualified/],
    ['an empty DataSource name', { dataSource: '' }, /TypeOrmModule\.forRoot\(\{ name \}\)/],
    ['a timeout of 0', { timeoutSeconds: 0 }, /from 0\.05 to 300, e\.g\. 5\./],
    ['a timeout past 300 s', { timeoutSeconds: 301 }, /from 0\.05 to 300/],
    [
      'a timeout that is no number',
      { timeoutSeconds: 'soon' as unknown as number },
      /environment values are strings: "soon" is not a number/,
    ],
    [
      'preparedStatements that is no boolean',
      { preparedStatements: 'yes' as unknown as boolean },
      /PgBouncer/,
    ],
    [
      'wakeUps other than auto or poll',
      { wakeUps: 'listen' as 'auto' },
      /option "wakeUps" is invalid.*Use "auto" \(LISTEN\/NOTIFY where it works, else polling\) or "poll"/,
    ],
  ])('refuses %s', (_, options, fix) => {
    const message = refusal(options);
    expect(message).toMatch(/option "\w+" is invalid/);
    expect(message).toMatch(fix);
  });
});

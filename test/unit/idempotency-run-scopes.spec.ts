/**
 * The run scopes: what a run's code reaches while the run is live, and nothing once it ended; the
 * same with the storage turned off between runs (`run-scope-disable`) and on the plain path.
 */
import { IdempotencyRunScopes } from '../../lib/context/idempotency-run-scope';
import type { IdempotencyRunScope } from '../../lib/context/idempotency-run-scope';
import type { IdempotencyRun } from '../../lib/execution/idempotency-run';

const scopeOf = (name: string): IdempotencyRunScope => ({
  run: { name } as unknown as IdempotencyRun,
  handlerStarted: false,
});

/** Resolves on the next macrotask, so a continuation really is a later async call. */
const later = () => new Promise<void>((resolve) => setTimeout(resolve, 1));

describe.each(['', 'run-scope-disable'])('IdempotencyRunScopes (plain: %p)', (plain) => {
  let scopes: IdempotencyRunScopes;
  beforeEach(() => {
    process.env.NEST_IDEMPOTENCY_PLAIN = plain;
    scopes = new IdempotencyRunScopes();
  });
  afterAll(() => delete process.env.NEST_IDEMPOTENCY_PLAIN);

  it("gives a run's code its scope, after awaits and timers, and nothing outside it", async () => {
    const a = scopeOf('a');

    const seen = await scopes.run(a, async () => {
      const first = scopes.current();
      await later();
      const afterTimer = await new Promise((resolve) =>
        setTimeout(() => resolve(scopes.current())),
      );
      return [first, scopes.current(), afterTimer];
    });

    expect(seen).toEqual([a, a, a]);
    expect(scopes.current()).toBeUndefined();
  });

  it('keeps each of two live runs its own scope when the other ends first', async () => {
    const [a, b] = [scopeOf('a'), scopeOf('b')];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));

    const aSees = scopes.run(a, async () => {
      await gate;
      return [scopes.current(), scopes.active];
    });
    await scopes.run(b, async () => later());
    scopes.end(b);
    release();

    expect(await aSees).toEqual([a, true]);
    scopes.end(a);
    expect(scopes.active).toBe(false);
  });

  it('gives code a run left running nothing once the run ended, even while another is live', async () => {
    const [a, b] = [scopeOf('a'), scopeOf('b')];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const leftBehind = scopes.run(a, () => gate.then(() => scopes.current()));

    scopes.run(b, () => undefined);
    scopes.end(a);
    release();

    expect(await leftBehind).toBeUndefined();
    expect(scopes.active).toBe(true);
    scopes.end(b);
    expect(scopes.active).toBe(false);
  });

  it('counts a scope run twice once, and ignores an end twice or of a scope never run', () => {
    const [a, b] = [scopeOf('a'), scopeOf('b')];

    scopes.run(a, () => undefined);
    scopes.run(a, () => undefined);
    scopes.run(b, () => undefined);
    scopes.end(b);
    scopes.end(b);
    scopes.end(scopeOf('never run'));
    expect(scopes.active).toBe(true);
    scopes.end(a);
    expect(scopes.active).toBe(false);
  });

  it('gives a run started after every run ended its scope, and code it left nothing', async () => {
    const [a, b] = [scopeOf('a'), scopeOf('b')];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const leftBehind = scopes.run(a, () => gate.then(() => scopes.current()));
    scopes.end(a);

    const seen = await scopes.run(b, async () => {
      await later();
      return scopes.current();
    });
    release();

    expect(seen).toBe(b);
    expect(await leftBehind).toBeUndefined();
    scopes.end(b);
  });
});

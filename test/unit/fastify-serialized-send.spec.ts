/**
 * sendsSerializedText's startup check: on a Fastify whose replies no longer carry the private
 * symbols it looks for, it takes the plain path (the object is serialized again) and says so
 * once. The fast path on a real Fastify is covered by the serializer tests on both settings of
 * NEST_IDEMPOTENCY_PLAIN (docs/design/internals.md).
 */
import type { Logger } from '@nestjs/common';
import type * as Trick from '../../lib/internals/fastify-serialized-send';

describe('sendsSerializedText', () => {
  const warnings: unknown[] = [];
  /** A fresh copy of the module (it looks the symbols up once per process), its warnings kept. */
  const load = (): typeof Trick => {
    let loaded: typeof Trick | undefined;
    jest.isolateModules(() => {
      const logger: typeof Logger = jest.requireActual('@nestjs/common').Logger;
      jest.spyOn(logger.prototype, 'warn').mockImplementation((message) => warnings.push(message));
      loaded = jest.requireActual('../../lib/internals/fastify-serialized-send');
    });
    return loaded!;
  };
  beforeEach(() => {
    warnings.length = 0;
  });
  afterEach(() => {
    jest.restoreAllMocks();
    delete process.env.NEST_IDEMPOTENCY_PLAIN;
  });

  it('falls back when the reply has no such symbols, and says so once', () => {
    const { sendsSerializedText } = load();
    const reply = { request: {} };

    expect(sendsSerializedText(reply)).toBe(false);
    expect(sendsSerializedText(reply)).toBe(false);
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0])).toContain('"fastify-serialized-send" is off');
  });

  it('is off without a warning when NEST_IDEMPOTENCY_PLAIN names it', () => {
    process.env.NEST_IDEMPOTENCY_PLAIN = 'fastify-serialized-send';
    const { sendsSerializedText } = load();

    expect(sendsSerializedText({ request: {} })).toBe(false);
    expect(warnings).toEqual([]);
  });
});

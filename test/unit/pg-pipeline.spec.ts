/**
 * The startup check of the pg pipeline trick: a client whose `pipeline` flag is not a boolean (a
 * pg before 8.23, or one that changed) makes the store send a completion before its COMMIT, and
 * says so once; `NEST_IDEMPOTENCY_PLAIN=pg-pipeline` turns the trick off without a word.
 */
import { Logger } from '@nestjs/common';
import { pgPipelineUsable, pipelining } from '../../lib/internals/pg-pipeline';

describe('pgPipelineUsable', () => {
  let warn: jest.SpyInstance;
  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => {
    warn.mockRestore();
    delete process.env.NEST_IDEMPOTENCY_PLAIN;
  });

  it("takes a client with pg's boolean pipeline flag", () => {
    expect(pgPipelineUsable({ pipeline: false })).toBe(true);
    expect(warn).not.toHaveBeenCalled();
  });

  it('is off, silently, when NEST_IDEMPOTENCY_PLAIN names it', () => {
    process.env.NEST_IDEMPOTENCY_PLAIN = 'shared-shape, pg-pipeline';
    expect(pgPipelineUsable({ pipeline: false })).toBe(false);
    expect(pgPipelineUsable({})).toBe(false);
    expect(warn).not.toHaveBeenCalled();
  });

  it('falls back for a client without the flag, and warns once', () => {
    expect(pgPipelineUsable({})).toBe(false);
    expect(pgPipelineUsable({ pipeline: 'yes' })).toBe(false);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0][0])).toContain('"pg-pipeline" is off');
  });

  it('turns the flag on for the two queries and back off after', () => {
    const client = { pipeline: false };
    const restore = pipelining(client);
    expect(client.pipeline).toBe(true);
    restore();
    expect(client.pipeline).toBe(false);
  });
});

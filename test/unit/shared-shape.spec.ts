/**
 * shareShape changes nothing a program can see, and its startup check turns it off (saying so
 * once) on a V8 it was not measured on or when NEST_IDEMPOTENCY_PLAIN names it. Whether V8 then
 * shares one map between responses is V8's private behaviour, which no test here asserts: the
 * bench's instruction count shows it (docs/design/internals.md).
 */
import { ServerResponse } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { Logger } from '@nestjs/common';
import express from 'express';
import { shareShape, sharedShapeOn } from '../../lib/internals/shared-shape';

const app = express();
const nodeResponse = () =>
  new ServerResponse({
    method: 'POST',
    httpVersionMajor: 1,
    httpVersionMinor: 1,
    headers: {},
  } as IncomingMessage);
/** A response as Express 5's own middleware leaves it: prototype set, then `locals` added. */
const expressResponse = () => {
  const res = nodeResponse();
  Object.setPrototypeOf(res, app.response);
  (res as unknown as { locals: object }).locals = Object.create(null);
  return res;
};

describe('shareShape', () => {
  it('changes nothing a program can see', () => {
    const res = expressResponse();
    res.statusCode = 201;
    const before = {
      keys: Reflect.ownKeys(res),
      values: Reflect.ownKeys(res).map((key) => (res as any)[key] as unknown),
      prototype: Object.getPrototypeOf(res) as object,
    };

    shareShape(res);

    expect(Reflect.ownKeys(res)).toEqual(before.keys);
    expect(Reflect.ownKeys(res).map((key) => (res as any)[key] as unknown)).toEqual(before.values);
    expect(Object.getPrototypeOf(res)).toBe(before.prototype);
    expect(res.statusCode).toBe(201);
  });

  describe('its startup check', () => {
    const warnings: unknown[] = [];
    beforeEach(() => {
      warnings.length = 0;
      jest.spyOn(Logger.prototype, 'warn').mockImplementation((message) => warnings.push(message));
    });
    afterEach(() => {
      jest.restoreAllMocks();
      delete process.env.NEST_IDEMPOTENCY_PLAIN;
    });

    it('keeps it on for the V8 this runs on', () => {
      expect(sharedShapeOn()).toBe(true);
      expect(warnings).toEqual([]);
    });

    it('falls back on a V8 it was not measured on, and says so once', () => {
      expect(sharedShapeOn('99.1.0')).toBe(false);
      expect(sharedShapeOn('99.1.0')).toBe(false);
      expect(warnings).toHaveLength(1);
      expect(String(warnings[0])).toContain('"shared-shape" is off: V8 99.1.0');
    });

    it('is off without a warning when NEST_IDEMPOTENCY_PLAIN names it', () => {
      process.env.NEST_IDEMPOTENCY_PLAIN = 'shared-shape';
      expect(sharedShapeOn()).toBe(false);
      expect(warnings).toEqual([]);
    });
  });
});

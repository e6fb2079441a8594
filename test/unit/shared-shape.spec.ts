/**
 * shareShape changes nothing a program can see. Whether V8 then shares one map between responses
 * is V8's private behaviour, which no test here asserts: the bench's instruction count shows it.
 */
import { ServerResponse } from 'node:http';
import type { IncomingMessage } from 'node:http';
import express from 'express';
import { shareShape } from '../../lib/http/shared-shape';

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
});

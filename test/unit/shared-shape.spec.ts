/**
 * shareShape: an object with a V8 map of its own (an Express 5 response) leaves with the map all
 * such objects share; one with a shared map keeps it; nothing a program can see changes. Maps are
 * compared with V8's own `%HaveSameMap`, turned on for this file.
 */
import { ServerResponse } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import express from 'express';
import { shareShape } from '../../lib/http/shared-shape';

setFlagsFromString('--allow-natives-syntax');
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (
  a: object,
  b: object,
) => boolean;
const fastProperties = new Function('o', 'return %HasFastProperties(o)') as (o: object) => boolean;

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
  it('gives Express responses one map, which stays shared as properties are added', () => {
    const [first, second] = [expressResponse(), expressResponse()];
    expect(sameMap(first, second)).toBe(false);

    shareShape(first);
    shareShape(second);
    expect(sameMap(first, second)).toBe(true);

    (first as unknown as { send: unknown }).send = () => undefined;
    (second as unknown as { send: unknown }).send = () => undefined;
    expect(sameMap(first, second)).toBe(true);
  });

  it('leaves an object whose map is shared already as it was', () => {
    const [first, second] = [nodeResponse(), nodeResponse()];
    shareShape(first);

    expect(fastProperties(first)).toBe(true);
    expect(sameMap(first, second)).toBe(true);
  });

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

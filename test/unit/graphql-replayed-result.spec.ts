/**
 * What a replayed mutation result looks like to GraphQL: the first result went through JSON,
 * and `@IdempotentMutation()` reads it back through the field's type before graphql-js
 * serializes it, so custom scalars that serialize only their internal form (`DateTime`,
 * `Timestamp`: a `Date`) answer as they did the first time. And the decorator's own options
 * are checked when the class is defined.
 */
import { GraphQLISODateTime, GraphQLTimestamp } from '@nestjs/graphql';
import {
  GraphQLEnumType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
} from 'graphql';
import { IdempotencyConfigurationError } from '../../lib';
import { IdempotentMutation } from '../../lib/graphql';
import type { IdempotentMutationOptions } from '../../lib/graphql';
import { reviveResult } from '../../lib/graphql/replayed-result';

const Status = new GraphQLEnumType({
  name: 'Status',
  values: { PAID: { value: 'B' }, B: { value: 'PAID' } },
});
const Payment = new GraphQLObjectType({
  name: 'Payment',
  fields: {
    id: { type: new GraphQLNonNull(GraphQLInt) },
    note: { type: GraphQLString },
    status: { type: Status },
    createdAt: { type: new GraphQLNonNull(GraphQLISODateTime) },
    settledAt: { type: GraphQLTimestamp },
  },
});

/** What graphql-js would answer for a payment value. */
const answer = (value: any) => ({
  id: value.id,
  note: value.note,
  status: Status.serialize(value.status),
  createdAt: GraphQLISODateTime.serialize(value.createdAt),
  settledAt: GraphQLTimestamp.serialize(value.settledAt),
});

describe('a replayed mutation result', () => {
  const first = {
    id: 1,
    note: '2026-01-02T03:04:05.000Z',
    status: 'B',
    createdAt: new Date('2026-01-02T03:04:05.678Z'),
    settledAt: new Date('2026-01-03T00:00:00.000Z'),
  };
  const stored = JSON.parse(JSON.stringify(first));

  it('answers as the first result did, DateTime and Timestamp included', () => {
    const revived = reviveResult(stored, new GraphQLNonNull(Payment)) as any;
    expect(answer(revived)).toEqual(answer(first));
    // Without it, JSON's ISO string is not a Date to these scalars.
    expect(GraphQLISODateTime.serialize(stored.createdAt)).toBeNull();
  });

  it('keeps strings that only look like dates, and enums as their stored internal value', () => {
    const revived = reviveResult(stored, Payment) as any;
    expect(revived.note).toBe(first.note);
    expect(revived.status).toBe('B');
    expect(Status.serialize(revived.status)).toBe('PAID');
  });

  it('follows lists, and leaves null and fields the type does not have', () => {
    const list = [stored, null, { ...stored, extra: '2026-01-01T00:00:00Z' }];
    const revived = reviveResult(list, new GraphQLList(Payment)) as any[];
    expect(revived[0].createdAt).toEqual(first.createdAt);
    expect(revived[1]).toBeNull();
    expect(revived[2].extra).toBe('2026-01-01T00:00:00Z');
    expect(reviveResult(null, Payment)).toBeNull();
    expect(reviveResult('a note', GraphQLString)).toBe('a note');
  });
});

describe('@IdempotentMutation() options', () => {
  const define = (options: IdempotentMutationOptions) => () => {
    class Payments {
      @IdempotentMutation(options)
      pay() {
        return 1;
      }
    }
    return Payments;
  };

  it('takes an argument name for the key and the route options', () => {
    expect(
      define({
        keyArg: 'idempotencyKey',
        responses: { ttlSeconds: 60 },
        execution: { transactional: true },
      }),
    ).not.toThrow();
  });

  it.each([
    [{ keyArg: 'idempotency-key' }, /"keyArg".*Name an argument/],
    [{ keyArg: '' }, /"keyArg"/],
    [{ wait: { maxSeconds: 5 } }, /"wait".*does not take it/],
    [{ responses: { storeStatuses: [200] } }, /"responses.storeStatuses"/],
    [{ responses: { replayHeaders: ['location'] } }, /"responses.replayHeaders"/],
    [{ responses: { ttlSeconds: -1 } }, /"responses.ttlSeconds"/],
    [{ ttlSeconds: 60 }, /"ttlSeconds" moved to "responses.ttlSeconds"/],
  ])('refuses %j when the class is defined', (options, message) => {
    expect(define(options as IdempotentMutationOptions)).toThrow(IdempotencyConfigurationError);
    expect(define(options as IdempotentMutationOptions)).toThrow(message);
  });
});

import type { ExecutionContext } from '@nestjs/common';
import { GraphQLError } from 'graphql';
import type { GraphQLResolveInfo } from 'graphql';
import type { IdempotencyCallTransport, IdempotentCall } from '../calls/idempotency-call-transport';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import type { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import { parsePlainKey, readIdempotencyKey } from '../utils/parse-idempotency-key';
import type { ParsedIdempotencyKey } from '../utils/parse-idempotency-key';
import { reviveResult } from './replayed-result';

/** The key carried by an argument: absent, not a key, or a key. */
function argumentKey(value: unknown, name: string): ParsedIdempotencyKey {
  if (value === undefined || value === null) return { kind: 'missing' };
  if (typeof value !== 'string') return { kind: 'invalid', reason: `"${name}" is not a string` };
  return parsePlainKey(value);
}

/**
 * How `@IdempotentMutation()` resolvers are read and refused. A call is the mutation field:
 * method `MUTATION`, path its field name, payload its arguments (without the key), scope the
 * module's (or route's) scope of the HTTP request. Refusals are `GraphQLError`s whose
 * `extensions.code` is the library's stable code.
 * @param keyArg - the argument that carries the key; the HTTP header when undefined
 * @internal
 */
export function graphqlCallTransport(keyArg: string | undefined): IdempotencyCallTransport {
  return {
    read(context: ExecutionContext, route: ResolvedIdempotencyRouteOptions): IdempotentCall {
      const args = context.getArgByIndex<Record<string, unknown> | undefined>(1);
      const info = context.getArgByIndex<GraphQLResolveInfo>(3);
      // Where the drivers put the HTTP request: `req` (Apollo, on Express and on Fastify, and a
      // context function that keeps it) or `reply.request` (Mercurius).
      const graphqlContext = context.getArgByIndex(2);
      const request = graphqlContext?.req ?? graphqlContext?.reply?.request;
      // No HTTP request: a context function that dropped it, or a WebSocket.
      if (!request) {
        throw new IdempotencyConfigurationError(
          `nest-idempotency: the GraphQL context of mutation "${info.fieldName}" has no HTTP ` +
            'request, so @IdempotentMutation() cannot read its key or its scope. Keep the ' +
            'request in the context as `req` (context: ({ req }) => ({ req, ... })); mutations ' +
            'over WebSockets are not supported.',
        );
      }
      // A retry must send the same arguments; the key itself names the call, it is not part of it.
      const payload: Record<string, unknown> = { ...args };
      if (keyArg !== undefined) delete payload[keyArg];
      return {
        key:
          keyArg === undefined
            ? readIdempotencyKey(request, route.header)
            : argumentKey(args?.[keyArg], keyArg),
        keyPlace:
          keyArg === undefined
            ? route.header
            : { call: 'mutation', where: `the "${keyArg}" argument` },
        method: 'MUTATION',
        path: info.fieldName,
        payload,
        scopeSource: request,
        namespace: 'mutation',
      };
    },

    refuse(problem: IdempotencyProblemException): GraphQLError {
      const { code, retryAfterSeconds } = problem;
      const retry = retryAfterSeconds !== undefined ? { retryAfterSeconds } : {};
      const extensions = { code, status: problem.getStatus(), ...retry };
      return new GraphQLError(problem.detail, { extensions });
    },

    // The stored JSON, read back through the mutation's return type (a DateTime into a Date); the
    // call was read first, so its info is there (`read` takes its field name).
    revive: (stored, context) =>
      reviveResult(stored, context.getArgByIndex<GraphQLResolveInfo>(3).returnType),
  };
}

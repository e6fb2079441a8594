import { hash } from 'node:crypto';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyKeySource } from '../decorators/idempotency-key-source';
import { headerLines, parseKeyValue } from '../utils/parse-idempotency-key';
import type { ParsedIdempotencyKey } from '../utils/parse-idempotency-key';
import type { ResolvedWebhookRoute } from './webhook-route';
import { signedIdOf, unsignedHeaderOf } from './webhook-signatures';
import type { WebhookDeliveryParts } from './webhook-signatures';

/**
 * The signed bytes of a request: its raw body, or none when it has no body at all.
 * @returns `undefined` when the body was not kept (`rawBody: true` is off)
 */
export function signedBodyOf(request: any): Buffer | undefined {
  const raw: unknown = request.rawBody;
  if (Buffer.isBuffer(raw)) return raw;
  if (typeof raw === 'string') return Buffer.from(raw, 'utf8');
  const length = Number(request.headers['content-length'] ?? 0);
  // No body at all: there is nothing to keep, and the signature is checked over nothing.
  if (!(length > 0) && request.headers['transfer-encoding'] === undefined) return Buffer.alloc(0);
  return undefined;
}

/**
 * What a signature check reads of a request: its headers, one value per header line (any
 * case), and its signed bytes.
 * @param request - the adapter's request
 * @param rawBody - its signed bytes (`signedBodyOf`)
 */
export function deliveryPartsOf(request: any, rawBody: Buffer): WebhookDeliveryParts {
  const rawHeaders: string[] | undefined = request.rawHeaders ?? request.raw?.rawHeaders;
  return { header: (name) => headerLines(rawHeaders, name), rawBody };
}

/**
 * The event id of a delivery (as a key is read: `parseKeyValue`), read only from what its signature covers (the body, and the
 * Standard Webhooks message id), unless the route opted into an unsigned header. A pure
 * function of the request: the webhook guard calls it once the signature verified, and the key
 * source calls it again, so no decision travels between them.
 * @param route - the route's webhook settings
 * @param request - the adapter's request
 */
export function webhookEventIdOf(route: ResolvedWebhookRoute, request: any): ParsedIdempotencyKey {
  const rawBody = signedBodyOf(request);
  if (!rawBody) return { kind: 'missing' };
  const delivery = deliveryPartsOf(request, rawBody);
  if (route.unsignedKeyHeader !== undefined) {
    return parseKeyValue(unsignedHeaderOf(delivery, route.unsignedKeyHeader));
  }
  let payload: unknown;
  try {
    payload = JSON.parse(rawBody.toString('utf8'));
  } catch {
    // Not JSON: the key function gets no payload.
  }
  return parseKeyValue(
    route.key({ payload, rawBody, signedId: signedIdOf(route.signature, delivery) }),
  );
}

/** The signature headers of a scheme, as the OpenAPI document shows them. */
function signatureHeaders(route: ResolvedWebhookRoute): Record<string, unknown>[] {
  const { signature, provider } = route;
  const described: [name: string, description: string][] = [];
  if (signature.scheme === 'stripe') {
    described.push([
      signature.header,
      `The ${provider} signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">. A ` +
        `delivery signed more than ${signature.toleranceSeconds} seconds from now is refused.`,
    ]);
  } else if (signature.scheme === 'standard-webhooks') {
    const { id, timestamp, signature: signatures } = signature.headers;
    described.push(
      [id, 'The message id: the same on every delivery of it.'],
      [timestamp, 'When the delivery was signed, in unix seconds.'],
      [signatures, 'Space-separated v1,<base64 HMAC-SHA256 of "id.timestamp.body"> signatures.'],
    );
  } else {
    const { header, prefix, encoding } = signature;
    described.push([header, `${prefix}<${encoding} HMAC-SHA256 of the raw body>.`]);
  }
  if (route.unsignedKeyHeader !== undefined) {
    described.push([
      route.unsignedKeyHeader,
      'The event id (not signed: a delivery sent again under a new id runs again).',
    ]);
  }
  return described.map(([name, description]) => ({
    name,
    in: 'header',
    required: true,
    description,
    schema: { type: 'string' },
  }));
}

/**
 * The key source of a webhook route: the event id of the delivery, derived from the request
 * itself (`webhookEventIdOf`) after its guard verified the signature. A delivery is named by
 * its event id alone, so every delivery of one event under one route is the same request: a
 * redelivery whose body changed is replayed, never refused with 422.
 * @param route - the route's webhook settings
 */
export function webhookKeySource(route: ResolvedWebhookRoute): IdempotencyKeySource {
  return {
    read: (request) => webhookEventIdOf(route, request),
    namespace: 'webhook',
    keyPlace: { call: 'webhook event', where: 'its event id' },
    fingerprint: (request, scope) => {
      const path = String(request.originalUrl ?? request.url ?? '').split('?')[0];
      return hash('sha256', `webhook\n${scope}\n${String(request.method).toUpperCase()} ${path}`);
    },
    openApi: {
      parameters: signatureHeaders(route),
      badRequest: {
        description:
          'The delivery is not signed by the provider (no signature header, a malformed one, ' +
          'no signature made with a configured secret, a timestamp outside the tolerance) or ' +
          'its event has no usable id. Nothing was processed.',
        problems: [
          IdempotencyProblemException.webhookSignatureInvalid(
            'no signature in it matches the body with a configured secret',
          ),
        ],
      },
    },
  };
}

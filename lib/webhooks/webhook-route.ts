import { createHash } from 'node:crypto';
import type { InjectionToken } from '@nestjs/common';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import { checkNumber, seconds } from '../config/idempotency.defaults';
import { DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS } from './idempotent-webhook.options';
import type {
  IdempotencyWebhookEvent,
  IdempotencyWebhookSecretList,
  IdempotencyWebhookSecrets,
  IdempotencyWebhookSecretsFactory,
  IdempotentWebhookOptions,
} from './idempotent-webhook.options';
import { signingKeyOf } from './webhook-signatures';
import type { ResolvedWebhookSignature } from './webhook-signatures';

/** A webhook route's settings, checked, with every default filled in. */
export interface ResolvedWebhookRoute {
  /** The provider's name: the scope, in the `webhook` namespace (`webhook:<provider>`). */
  provider: string;
  /** How deliveries are signed. */
  signature: ResolvedWebhookSignature;
  /** What gives the secrets on each delivery (secrets given as they are were checked already). */
  secrets: Required<IdempotencyWebhookSecretsFactory>;
  /** The event id of a verified delivery, from what its signature covers. */
  key: (event: IdempotencyWebhookEvent) => unknown;
  /** The unsigned header the key is read from instead, when the route opted in (`hmac`). */
  unsignedKeyHeader?: string;
}

const HEADER = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const PROVIDER = /^[A-Za-z0-9._-]{1,100}$/;
const TOLERANCE = seconds(
  1,
  86_400,
  DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS.toleranceSeconds,
  'A delivery signed longer ago than this is refused as a replay.',
);

function fail(provider: unknown, option: string, fix: string): never {
  throw new IdempotencyConfigurationError(
    `nest-idempotency: @IdempotentWebhook({ provider: ${JSON.stringify(provider)} }) option ` +
      `"${option}" is invalid. ${fix}`,
  );
}

function header(provider: unknown, option: string, given: unknown, fallback: string): string {
  if (given === undefined) return fallback;
  if (typeof given !== 'string' || !HEADER.test(given)) {
    fail(provider, option, `Use an HTTP header name such as "${fallback}".`);
  }
  return given;
}

function signatureOf(provider: unknown, given: unknown): ResolvedWebhookSignature {
  const s = (given ?? {}) as Record<string, any>;
  const defaults = DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS;
  const tolerance = () =>
    s.toleranceSeconds === undefined
      ? defaults.toleranceSeconds
      : checkNumber('signature.toleranceSeconds', s.toleranceSeconds, TOLERANCE);
  switch (s.scheme) {
    case 'stripe':
      return {
        scheme: 'stripe',
        header: header(provider, 'signature.header', s.header, defaults.stripe.header),
        toleranceSeconds: tolerance(),
      };
    case 'standard-webhooks': {
      const given = (s.headers ?? {}) as Record<string, unknown>;
      const names = defaults.standardWebhooks.headers;
      const named = (part: keyof typeof names) =>
        header(provider, `signature.headers.${part}`, given[part], names[part]);
      return {
        scheme: 'standard-webhooks',
        headers: { id: named('id'), timestamp: named('timestamp'), signature: named('signature') },
        toleranceSeconds: tolerance(),
      };
    }
    case 'hmac': {
      const encoding = s.encoding ?? defaults.hmac.encoding;
      if (encoding !== 'hex' && encoding !== 'base64') {
        fail(provider, 'signature.encoding', 'Use "hex" or "base64".');
      }
      const prefix = s.prefix ?? defaults.hmac.prefix;
      if (typeof prefix !== 'string') fail(provider, 'signature.prefix', 'Use a string, or "".');
      return {
        scheme: 'hmac',
        header: header(provider, 'signature.header', s.header, defaults.hmac.header),
        prefix,
        encoding,
      };
    }
    default:
      return fail(
        provider,
        'signature',
        "Use { scheme: 'stripe' }, { scheme: 'standard-webhooks' } or { scheme: 'hmac' }.",
      );
  }
}

/**
 * The HMAC keys of a list of secrets, checked without ever echoing one.
 * @param where - what gave them, for the message
 * @throws IdempotencyConfigurationError when there is none, or one is not usable
 */
export function keysOf(
  scheme: ResolvedWebhookSignature['scheme'],
  given: unknown,
  where: string,
): Buffer[] {
  const list: unknown[] = typeof given === 'string' ? [given] : Array.isArray(given) ? given : [];
  const fix =
    scheme === 'standard-webhooks'
      ? 'A Standard Webhooks secret is whsec_ followed by base64, as the provider shows it.'
      : 'Give the signing secret as the provider shows it.';
  if (list.length === 0 || !list.every((secret) => typeof secret === 'string' && secret !== '')) {
    throw new IdempotencyConfigurationError(
      `nest-idempotency: ${where} gave no webhook secret, or one that is not a non-empty ` +
        `string (secrets are never shown). Give one secret, or several while rotating. ${fix}`,
    );
  }
  return list.map((secret, index) => {
    const key = signingKeyOf(scheme, secret as string);
    if (!key) {
      throw new IdempotencyConfigurationError(
        `nest-idempotency: ${where} gave a webhook secret (number ${index + 1}) that cannot be ` +
          `used (secrets are never shown). ${fix}`,
      );
    }
    return key;
  });
}

function secretsOf(
  provider: string,
  scheme: ResolvedWebhookSignature['scheme'],
  given: IdempotencyWebhookSecrets,
): Required<IdempotencyWebhookSecretsFactory> {
  if (typeof given === 'function') return { inject: [], useFactory: given };
  if (typeof given === 'object' && given !== null && !Array.isArray(given)) {
    const factory = given as { inject?: unknown; useFactory?: unknown };
    if (typeof factory.useFactory !== 'function') {
      fail(provider, 'secrets', 'Use a string, an array of strings, or { inject, useFactory }.');
    }
    if (factory.inject !== undefined && !Array.isArray(factory.inject)) {
      fail(provider, 'secrets.inject', 'Use an array of providers, e.g. [ConfigService].');
    }
    return {
      inject: (factory.inject as InjectionToken[] | undefined) ?? [],
      useFactory: factory.useFactory as IdempotencyWebhookSecretsFactory['useFactory'],
    };
  }
  // Secrets given as they are: checked now, at class definition.
  keysOf(scheme, given, `@IdempotentWebhook({ provider: '${provider}' })`);
  return { inject: [], useFactory: () => given as IdempotencyWebhookSecretList };
}

/** The event id each scheme's signature covers, when the route gives no `key`. */
const DEFAULT_KEYS: Record<ResolvedWebhookSignature['scheme'], ResolvedWebhookRoute['key']> = {
  stripe: (event) => event.payload?.id,
  'standard-webhooks': (event) => event.signedId,
  // The SHA-256 of the signed body: the key of a scheme that signs the body alone.
  hmac: (event) => `sha256:${createHash('sha256').update(event.rawBody).digest('hex')}`,
};

/**
 * Checks `@IdempotentWebhook()`'s own options and fills in the defaults.
 * @throws IdempotencyConfigurationError naming the option and the fix (at class definition)
 */
export function resolveWebhookRoute(options: IdempotentWebhookOptions): ResolvedWebhookRoute {
  const { provider } = options ?? ({} as IdempotentWebhookOptions);
  if (typeof provider !== 'string' || !PROVIDER.test(provider)) {
    fail(provider, 'provider', 'Use 1 to 100 letters, digits, ".", "_" or "-", e.g. "stripe".');
  }
  const signature = signatureOf(provider, options.signature);
  const secrets = secretsOf(provider, signature.scheme, options.secrets);
  const { key, unsignedKeyHeader } = options;
  if (key !== undefined && typeof key !== 'function') {
    fail(provider, 'key', 'Use a function (event) => the event id.');
  }
  if (unsignedKeyHeader !== undefined) {
    const { scheme } = signature;
    const fix = `The ${scheme} scheme signs its event id: remove it, the key comes from there.`;
    if (scheme !== 'hmac') fail(provider, 'unsignedKeyHeader', fix);
    if (key !== undefined) fail(provider, 'unsignedKeyHeader', 'Give it or key, not both.');
  }
  return {
    provider,
    signature,
    secrets,
    key: key ?? DEFAULT_KEYS[signature.scheme],
    unsignedKeyHeader:
      unsignedKeyHeader === undefined
        ? undefined
        : header(provider, 'unsignedKeyHeader', unsignedKeyHeader, 'X-GitHub-Delivery'),
  };
}

/** Metadata key of a webhook route's settings, on its handler: what the webhook guard reads. */
export const WEBHOOK_ROUTE_METADATA = 'nest-idempotency:webhook-route';

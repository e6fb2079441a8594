import type { InjectionToken } from '@nestjs/common';
import type { IdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';

/**
 * Stripe's scheme: a `Stripe-Signature: t=<unix seconds>,v1=<hex>` header, where each `v1` is
 * the hex HMAC-SHA256 of `` `${t}.${rawBody}` `` keyed with the endpoint's secret (used as it
 * is, `whsec_` included). Several `v1` values may come (Stripe signs with every secret of a
 * rolled endpoint); one that matches a configured secret is enough.
 */
export interface IdempotencyStripeSignature {
  /** Which scheme this is. */
  scheme: 'stripe';
  /**
   * The header that carries the signature (any case).
   * @defaultValue `DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS.stripe.header` (`Stripe-Signature`)
   */
  header?: string;
  /**
   * How far the signed timestamp may be from now, either way, in seconds: an older delivery is
   * a replay and refused. Accepted: 1 to 86400.
   * @defaultValue `DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS.toleranceSeconds` (300)
   */
  toleranceSeconds?: number;
}

/**
 * The Standard Webhooks specification (Svix, and providers that follow it): `webhook-id`,
 * `webhook-timestamp` (unix seconds) and `webhook-signature` (a space-separated list of
 * `v1,<base64>`), each signature the HMAC-SHA256 of `` `${id}.${timestamp}.${rawBody}` ``
 * keyed with the secret's bytes (`whsec_<base64>`). The key is the `webhook-id`, the same on
 * every delivery of one message.
 */
export interface IdempotencyStandardWebhooksSignature {
  /** Which scheme this is. */
  scheme: 'standard-webhooks';
  /**
   * The three headers' names (any case); `svix-id`, `svix-timestamp`, `svix-signature` for
   * Svix's older names.
   * @defaultValue `DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS.standardWebhooks.headers` (`webhook-id`,
   *   `webhook-timestamp`, `webhook-signature`)
   */
  headers?: {
    /** The message id's header. */
    id?: string;
    /** The signing time's header (unix seconds). */
    timestamp?: string;
    /** The signatures' header. */
    signature?: string;
  };
  /**
   * How far the signed timestamp may be from now, either way, in seconds. Accepted: 1 to 86400.
   * @defaultValue `DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS.toleranceSeconds` (300)
   */
  toleranceSeconds?: number;
}

/**
 * A plain HMAC-SHA256 of the raw body in one header, as GitHub sends it
 * (`X-Hub-Signature-256: sha256=<hex>`), keyed with the secret's UTF-8 bytes. It signs no
 * timestamp and no header, so nothing bounds a replay's age and a delivery id header
 * (`X-GitHub-Delivery`) is not signed: by default the key is the SHA-256 of the signed body, so a
 * captured delivery sent again, under any delivery id, is a duplicate.
 */
export interface IdempotencyHmacSignature {
  /** Which scheme this is. */
  scheme: 'hmac';
  /**
   * The header that carries the signature (any case).
   * @defaultValue `DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS.hmac.header` (`X-Hub-Signature-256`)
   */
  header?: string;
  /**
   * What comes before the digest in the header (compared in any case); `''` for none.
   * @defaultValue `DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS.hmac.prefix` (`sha256=`)
   */
  prefix?: string;
  /**
   * How the digest is written: `hex` (GitHub) or `base64` (Shopify's `X-Shopify-Hmac-Sha256`).
   * @defaultValue `DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS.hmac.encoding` (`hex`)
   */
  encoding?: 'hex' | 'base64';
}

/** How a provider signs its deliveries: one of the three schemes. */
export type IdempotencyWebhookSignature =
  IdempotencyStripeSignature | IdempotencyStandardWebhooksSignature | IdempotencyHmacSignature;

/** One secret or several (all accepted: the old and the new one while rotating). */
export type IdempotencyWebhookSecretList = string | readonly string[];

/**
 * Secrets read when a delivery comes, from the application's configuration: `useFactory` gets
 * the providers named in `inject` (found anywhere in the application) and returns the secrets.
 * It is called for every delivery, so a secret changed in the configuration is used at once;
 * keep it cheap.
 * @example
 * secrets: {
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => config.getOrThrow<string>('STRIPE_WEBHOOK_SECRETS').split(','),
 * }
 */
export interface IdempotencyWebhookSecretsFactory {
  /** Providers given to `useFactory`, in order. */
  inject?: InjectionToken[];
  /** Returns the secrets (or a promise of them). */
  useFactory: (
    ...dependencies: any[]
  ) => IdempotencyWebhookSecretList | Promise<IdempotencyWebhookSecretList>;
}

/**
 * The signing secrets: a string, several (every one is accepted, for rotation), a function
 * that returns them, or a factory with injected providers. A Standard Webhooks secret is
 * `whsec_` followed by base64; the others are used as written.
 */
export type IdempotencyWebhookSecrets =
  | IdempotencyWebhookSecretList
  | (() => IdempotencyWebhookSecretList | Promise<IdempotencyWebhookSecretList>)
  | IdempotencyWebhookSecretsFactory;

/**
 * What the signature of a verified delivery covers, as `key` gets it: no header it does not
 * sign, so a key read from it cannot be changed by whoever replays a captured delivery.
 */
export interface IdempotencyWebhookEvent {
  /** The raw body parsed as JSON, or `undefined` when it is not JSON. */
  payload: any;
  /** The raw body, the bytes that were signed. */
  rawBody: Buffer;
  /**
   * The id the signature covers besides the body: the `standard-webhooks` message id
   * (`webhook-id`); `undefined` with `stripe` and `hmac`, which sign the body alone.
   */
  signedId: string | undefined;
}

/**
 * The route options `@IdempotentWebhook()` passes on to the route, as `@Idempotent()` takes
 * them, without the `request` group: not the key's header, the scope (the provider), nor what
 * compares bodies: the event id alone names a delivery.
 * @interface
 */
export type IdempotentWebhookRouteOptions = Omit<IdempotencyRouteOptions, 'request'>;

/** What `@IdempotentWebhook()` accepts. */
export interface IdempotentWebhookOptions extends IdempotentWebhookRouteOptions {
  /**
   * Names the provider: its events' records have the scope `webhook:<provider>`, so two
   * providers' event ids never meet, and no HTTP route's scope can name them (a caller's scope
   * that starts with `webhook:` is hashed). Two endpoints that receive the same events need two
   * names. 1 to 100 characters: letters, digits, `.`, `_`, `-`.
   */
  provider: string;
  /** How the provider signs deliveries. */
  signature: IdempotencyWebhookSignature;
  /** The signing secrets; several at once while rotating. */
  secrets: IdempotencyWebhookSecrets;
  /**
   * The event id of a verified delivery, the idempotency key (1 to 255 printable ASCII
   * characters; a number counts as its string form), from what the signature covers. By
   * default: the body's `id` with `stripe`, the signed `webhook-id` with `standard-webhooks`,
   * `sha256:` and the hex SHA-256 of the signed body with `hmac`.
   * @example
   * key: (event) => event.payload?.event_id // an id inside the signed body
   */
  key?: (event: IdempotencyWebhookEvent) => unknown;
  /**
   * `hmac` only, and only when two different events may come with byte-identical bodies: reads
   * the key from this header, which the signature does NOT cover (GitHub: `X-GitHub-Delivery`).
   * What it allows: anyone who captured one delivery can send it again under a fresh id, and
   * the handler runs again each time, with no time limit (the scheme signs no timestamp). Not
   * with `key`.
   */
  unsignedKeyHeader?: string;
}

/**
 * Reads the current time, in milliseconds since the epoch, for the timestamp tolerance. Provide
 * one under `IDEMPOTENCY_WEBHOOK_CLOCK` to test stale deliveries without waiting.
 */
export type IdempotencyWebhookClock = () => number;

/**
 * Injection token of the clock the webhook guard reads (`Date.now` when none is provided), in
 * the module that declares the webhook controller.
 * @example
 * providers: [{ provide: IDEMPOTENCY_WEBHOOK_CLOCK, useValue: () => Date.parse('2026-01-01T00:00:00Z') }]
 */
export const IDEMPOTENCY_WEBHOOK_CLOCK = Symbol('IDEMPOTENCY_WEBHOOK_CLOCK');

/** The defaults of `@IdempotentWebhook()`'s signature schemes. */
export const DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS = Object.freeze({
  /** How far a signed timestamp may be from now, in seconds (Stripe's and the spec's 5 minutes). */
  toleranceSeconds: 300,
  /** The `stripe` scheme's defaults. */
  stripe: Object.freeze({
    /** Stripe's signature header. */
    header: 'Stripe-Signature',
  }),
  /** The `standard-webhooks` scheme's defaults. */
  standardWebhooks: Object.freeze({
    /** The specification's three headers. */
    headers: Object.freeze({
      /** The message id: the key. */
      id: 'webhook-id',
      /** When the delivery was signed, in unix seconds. */
      timestamp: 'webhook-timestamp',
      /** The space-separated `v1,<base64>` signatures. */
      signature: 'webhook-signature',
    }),
  }),
  /** The `hmac` scheme's defaults: GitHub's. */
  hmac: Object.freeze({
    /** GitHub's signature header. */
    header: 'X-Hub-Signature-256',
    /** What comes before the digest. */
    prefix: 'sha256=',
    /** How the digest is written. */
    encoding: 'hex' as 'hex' | 'base64',
  }),
});

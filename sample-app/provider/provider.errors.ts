/** A failure reported by the fake payment provider. */
export abstract class ProviderError extends Error {
  /** Whether the provider may have charged before failing. */
  abstract readonly mayHaveCharged: boolean;
}

/** The card was declined: final, retrying with the same key declines again. */
export class CardDeclinedError extends ProviderError {
  readonly mayHaveCharged = false;
  constructor() {
    super('Your card was declined.');
  }
}

/** The provider could not take the request; nothing was charged. Retry with the same key. */
export class ProviderUnavailableError extends ProviderError {
  readonly mayHaveCharged = false;
  constructor() {
    super('The payment provider is temporarily unavailable.');
  }
}

/** The provider did not answer in time; it may have charged. Retry with the same key. */
export class ProviderTimeoutError extends ProviderError {
  readonly mayHaveCharged = true;
  constructor() {
    super('The payment provider did not answer in time.');
  }
}

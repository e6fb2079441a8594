import { HttpException, HttpStatus } from '@nestjs/common';
import {
  CardDeclinedError,
  ProviderError,
  ProviderTimeoutError,
  ProviderUnavailableError,
} from '../provider/provider.errors';

/**
 * Turns a provider failure into the HTTP answer of the payments API. A decline is final (402,
 * stored and replayed by the idempotency layer); an outage (503) or a timeout (504) is not
 * stored, so a retry with the same key runs again — and the derived key makes the provider
 * return the charge it may already have made instead of charging twice.
 *
 * @returns the HttpException to throw, or the error itself when it is not a provider error
 */
export function toHttpError(error: unknown): unknown {
  if (!(error instanceof ProviderError)) return error;
  if (error instanceof CardDeclinedError) {
    return new HttpException(
      { error: { type: 'card_error', code: 'card_declined', message: error.message } },
      HttpStatus.PAYMENT_REQUIRED,
    );
  }
  const code = error instanceof ProviderTimeoutError ? 'provider_timeout' : 'provider_unavailable';
  const status =
    error instanceof ProviderUnavailableError
      ? HttpStatus.SERVICE_UNAVAILABLE
      : HttpStatus.GATEWAY_TIMEOUT;
  return new HttpException(
    {
      error: {
        type: 'api_error',
        code,
        message: `${error.message} Retry with the same Idempotency-Key.`,
      },
    },
    status,
  );
}

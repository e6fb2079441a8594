import { Injectable, UnauthorizedException } from '@nestjs/common';
import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { readAccountId } from './account-id';

/**
 * Requires `X-Account-Id` (401 without). Applied to the controller class, so it runs before the
 * idempotency guard: an unauthenticated request never claims a key.
 */
@Injectable()
export class AccountGuard implements CanActivate {
  /** @inheritDoc */
  canActivate(context: ExecutionContext): boolean {
    if (readAccountId(context.switchToHttp().getRequest())) return true;
    throw new UnauthorizedException({
      error: {
        type: 'authentication_error',
        code: 'account_missing',
        message: 'Send the X-Account-Id header.',
      },
    });
  }
}

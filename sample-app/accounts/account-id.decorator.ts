import { createParamDecorator } from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import { readAccountId } from './account-id';

/** Injects the caller's account id (checked by `AccountGuard`). */
export const AccountId = createParamDecorator((_data: unknown, context: ExecutionContext): string =>
  readAccountId(context.switchToHttp().getRequest())!,
);

import { randomBytes } from 'node:crypto';
import { Inject } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { IdempotentOperation, defineSteps, proceed, respond, retryLater } from '../../lib/phases';
import { CrashHook } from '../crash/crash-hook';
import { FakePaymentProvider } from '../provider/fake-payment-provider.service';
import { PROVIDER_CHARGE_TIMEOUT_SECONDS } from '../provider/provider.constants';
import {
  CardDeclinedError,
  ProviderTimeoutError,
  ProviderUnavailableError,
} from '../provider/provider.errors';
import type { CreatePaymentDto } from './create-payment.dto';
import { PaymentEntity } from './payment.entity';
import { toPaymentResponse } from './payment.response';
import type { PaymentResponse } from './payment.response';
import { toHttpError } from './provider-error.mapper';

/** What `POST /payments` stores as its input: the body, and the account it charges for. */
export interface CreatePaymentInput extends CreatePaymentDto {
  accountId: string;
}

/** State carried from one step to the next, on the idempotency record. */
export interface CreatePaymentState {
  paymentId: string;
  chargeId?: string;
  /** The provider declined the card (its message). */
  declined?: string;
}

/** The 402 body of a declined card, with the provider's message. */
export interface CardDeclinedResponse {
  error: { type: 'card_error'; code: 'card_declined'; message: string };
}

/** What `POST /payments` answers: the payment (201), or the decline (402). */
export type CreatePaymentOutput = PaymentResponse | CardDeclinedResponse;

/**
 * `POST /payments` in atomic phases, the Rocket Rides lifecycle (README "Phases"):
 *
 * 1. local `payment_created`: the payment row `pending` and an audit row, in one transaction;
 * 2. foreign `charged`: the provider charge, with `derivedKey('charge')`, outside any
 *    transaction; the provider's answer (a charge, or a decline) is recorded with the move to
 *    `charged`;
 * 3. local, to `finished`: the payment `succeeded` with its charge, an audit row and a staged
 *    `send_receipt` job, and the 201 — or, after a decline, the payment `failed` and the 402.
 *
 * A retry (or the completer) resumes at the last recovery point; a crash after the charge and
 * before it was recorded charges again with the same key, and the provider returns the charge it
 * made.
 */
@IdempotentOperation('payments.create')
export class CreatePaymentOperation {
  readonly steps;

  /**
   * @param chargeTimeoutSeconds - the longest the charge may take (sized to the lease); past
   *   it the payment is retried later
   */
  constructor(
    provider: FakePaymentProvider,
    crash: CrashHook,
    @Inject(PROVIDER_CHARGE_TIMEOUT_SECONDS) chargeTimeoutSeconds: number,
  ) {
    this.steps = defineSteps<CreatePaymentInput, CreatePaymentState, CreatePaymentOutput>(
      (step) => [
        step.local('payment_created', async ({ manager, input }) => {
          const paymentId = `pay_${randomBytes(12).toString('hex')}`;
          await manager.insert(PaymentEntity, {
            id: paymentId,
            accountId: input.accountId,
            amount: input.amount,
            currency: input.currency,
            customerId: input.customerId,
            description: input.description ?? null,
            status: 'pending',
            chargeId: null,
          });
          await audit(manager, paymentId, 'created');
          return proceed({ paymentId });
        }),
        step.foreign(
          'charged',
          { timeoutSeconds: chargeTimeoutSeconds },
          async ({ input, identity, derivedKey }) => {
            crash.at('after_payment_created', identity.key);
            try {
              const charge = await provider.charge({
                idempotencyKey: derivedKey('charge'),
                customerId: input.customerId,
                amount: input.amount,
                currency: input.currency,
              });
              crash.at('after_charge_before_record', identity.key);
              return proceed({ chargeId: charge.id });
            } catch (error) {
              // A decline is an answer: recorded, then answered 402 by the next step.
              if (error instanceof CardDeclinedError) return proceed({ declined: error.message });
              // Nothing charged: give the key back; a retry charges with the same key.
              if (error instanceof ProviderUnavailableError) return retryLater(error.message);
              // It may have charged: fail with 504 (not stored); a retry finds that charge.
              if (error instanceof ProviderTimeoutError) throw toHttpError(error);
              throw error;
            }
          },
        ),
        step.local('succeeded', async ({ manager, state, identity, stage }) => {
          crash.at('after_charged', identity.key);
          const { paymentId, chargeId, declined } = state;
          if (declined !== undefined) {
            await manager.update(PaymentEntity, paymentId, { status: 'failed' });
            await audit(manager, paymentId, 'declined');
            return respond(402, {
              error: { type: 'card_error', code: 'card_declined', message: declined },
            });
          }
          await manager.update(PaymentEntity, paymentId, { status: 'succeeded', chargeId });
          await audit(manager, paymentId, 'succeeded');
          await stage('send_receipt', { paymentId });
          const payment = await manager.findOneByOrFail(PaymentEntity, { id: paymentId });
          return respond(201, toPaymentResponse(payment), { Location: `/payments/${paymentId}` });
        }),
      ],
    );
  }
}

async function audit(manager: EntityManager, paymentId: string, event: string): Promise<void> {
  await manager.query('INSERT INTO payment_audit (payment_id, event) VALUES ($1, $2)', [
    paymentId,
    event,
  ]);
}

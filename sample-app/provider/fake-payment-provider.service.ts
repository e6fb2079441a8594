import { randomBytes } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ProviderChargeEntity } from './provider-charge.entity';
import { MISBEHAVING_CUSTOMERS, PROVIDER_LATENCY_MS } from './provider.constants';
import {
  CardDeclinedError,
  ProviderTimeoutError,
  ProviderUnavailableError,
} from './provider.errors';

/** What a caller asks the provider to charge. */
export interface ChargeRequest {
  /** The provider charges once per key: a repeated key returns the first charge. */
  idempotencyKey: string;
  customerId: string;
  amount: number;
  currency: string;
}

/**
 * A stand-in for a payment provider that honours idempotency keys, like Stripe does. It is a
 * foreign system: it keeps its tables in the app's database for the demo, but writes on its own
 * connections, never inside a caller's transaction (the charge step of `POST /payments` runs
 * outside any), so a charge survives whatever the caller does next — which is exactly why the
 * caller must send the same key on every retry.
 */
@Injectable()
export class FakePaymentProvider {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(PROVIDER_LATENCY_MS) private readonly latencyMs: number,
  ) {}

  /**
   * Charges a customer once per idempotency key.
   *
   * @returns the charge (the existing one when the key was used before)
   * @throws CardDeclinedError for `cus_declined`
   * @throws ProviderUnavailableError on the first call of a key for `cus_unavailable_once`
   * @throws ProviderTimeoutError on the first call of a key for `cus_timeout_once` (after charging)
   */
  async charge(request: ChargeRequest): Promise<ProviderChargeEntity> {
    if (this.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
    const call = await this.countCall(request.idempotencyKey);
    const existing = await this.findByKey(request.idempotencyKey);
    if (existing) return existing;
    if (request.customerId === MISBEHAVING_CUSTOMERS.declined) throw new CardDeclinedError();
    if (request.customerId === MISBEHAVING_CUSTOMERS.unavailableOnce && call === 1) {
      throw new ProviderUnavailableError();
    }
    const charge = await this.createCharge(request);
    if (request.customerId === MISBEHAVING_CUSTOMERS.timeoutOnce && call === 1) {
      throw new ProviderTimeoutError();
    }
    return charge;
  }

  /**
   * Lists charges, oldest first.
   * @param customerId - only this customer's charges, when given
   */
  listCharges(customerId?: string): Promise<ProviderChargeEntity[]> {
    return this.dataSource.getRepository(ProviderChargeEntity).find({
      where: customerId === undefined ? {} : { customerId },
      order: { createdAt: 'ASC', id: 'ASC' },
    });
  }

  private async countCall(idempotencyKey: string): Promise<number> {
    const [row] = await this.dataSource.query(
      `INSERT INTO provider_calls (idempotency_key, calls) VALUES ($1, 1)
       ON CONFLICT (idempotency_key) DO UPDATE SET calls = provider_calls.calls + 1
       RETURNING calls`,
      [idempotencyKey],
    );
    return Number(row.calls);
  }

  private findByKey(idempotencyKey: string): Promise<ProviderChargeEntity | null> {
    return this.dataSource.getRepository(ProviderChargeEntity).findOneBy({ idempotencyKey });
  }

  private async createCharge(request: ChargeRequest): Promise<ProviderChargeEntity> {
    // Two concurrent calls with one key: the unique key makes the second one read the first.
    await this.dataSource
      .createQueryBuilder()
      .insert()
      .into(ProviderChargeEntity)
      .values({
        id: `ch_${randomBytes(12).toString('hex')}`,
        idempotencyKey: request.idempotencyKey,
        customerId: request.customerId,
        amount: request.amount,
        currency: request.currency,
      })
      .orIgnore()
      .execute();
    return (await this.findByKey(request.idempotencyKey))!;
  }
}

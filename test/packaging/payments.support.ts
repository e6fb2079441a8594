/**
 * What the README's Usage code refers to but leaves to the reader, copied into each generated
 * application as `src/payments.support.ts`: the request body type, the Payment entity and its
 * migration, and a payment provider client. The provider is a fake that honours idempotency keys
 * and takes SLOW_CHARGE_MS for the amount SLOW_AMOUNT, so that a duplicate request can arrive
 * while the first is still running (409).
 */
import { Injectable } from '@nestjs/common';
import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { MigrationInterface, QueryRunner } from 'typeorm';

export const SLOW_AMOUNT = 4090;
export const SLOW_CHARGE_MS = 1500;

export class CreatePaymentDto {
  amount!: number;
  currency!: string;
  customerId!: string;
}

@Entity('payments')
export class Payment {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column('integer')
  amount!: number;

  @Column('text')
  currency!: string;

  @Column('text', { name: 'customer_id' })
  customerId!: string;

  @Column('text', { name: 'charge_id' })
  chargeId!: string;
}

export class CreatePayments1732233600001 implements MigrationInterface {
  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE payments (id serial PRIMARY KEY, amount integer NOT NULL, ' +
        'currency text NOT NULL, customer_id text NOT NULL, charge_id text NOT NULL UNIQUE)',
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE payments');
  }
}

@Injectable()
export class PaymentProvider {
  private readonly charges = new Map<string, { id: string }>();

  async charge(request: { amount: number; idempotencyKey: string }): Promise<{ id: string }> {
    if (request.amount === SLOW_AMOUNT) {
      await new Promise((resolve) => setTimeout(resolve, SLOW_CHARGE_MS));
    }
    let charge = this.charges.get(request.idempotencyKey);
    if (!charge) {
      charge = { id: `ch_${this.charges.size + 1}` };
      this.charges.set(request.idempotencyKey, charge);
    }
    return charge;
  }
}

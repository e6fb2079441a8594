/**
 * The history app's webhook: `POST /webhooks/events`, Stripe-signed with the run's test secret,
 * under `@IdempotentWebhook()`. Its handler writes one `webhook_effects` row per run in the
 * transaction that stores its answer; the table has no unique key, so an event processed twice
 * shows as two rows on the final primary.
 */
import { Body, Controller, HttpCode, Inject, Post } from '@nestjs/common';
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyContext } from '../../../lib';
import { IdempotentWebhook } from '../../../lib/webhooks';

/** The signing secret the run's clients and the apps share (a test value). */
export const WEBHOOK_SECRET = 'whsec_history_run';

/** A webhook event as the run sends it. */
export interface WebhookEventBody {
  id: string;
  type: string;
  amount: number;
}

/** The webhook handler's effect table: deliberately no unique key on `event_id`. */
export class CreateWebhookEffects1764028800102 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE IF NOT EXISTS webhook_effects (
      id serial PRIMARY KEY, event_id text NOT NULL)`);
  }
  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE webhook_effects');
  }
}

/** The handler's own time, so a concurrent delivery meets it in flight. */
const work = () => new Promise((resolve) => setTimeout(resolve, 30 + Math.random() * 120));

@Controller('webhooks')
export class WebhookEventsController {
  constructor(@Inject(IdempotencyContext) private readonly idempotency: IdempotencyContext) {}

  @Post('events')
  @HttpCode(200)
  @IdempotentWebhook({
    provider: 'history',
    signature: { scheme: 'stripe' },
    secrets: WEBHOOK_SECRET,
    execution: { transactional: true },
  })
  async event(@Body() event: WebhookEventBody) {
    await work();
    await this.idempotency.entityManager.query(
      'INSERT INTO webhook_effects (event_id) VALUES ($1)',
      [event.id],
    );
    return { received: event.id, type: event.type };
  }
}

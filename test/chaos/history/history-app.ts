/**
 * One instance of the history run's app, run as a child process (`HistoryInstances` starts it
 * through the chaos suite's `AppCluster`): payments on `@Idempotent()` routes, one transactional
 * (its order row is the local effect), one plain (its only effect is the provider's charge, keyed
 * by the derived key), and a staged one (`history-staged.ts`: an operation in phases whose job
 * writes its effect in the drainer's transaction), and a Stripe-signed webhook
 * (`history-webhook-route.ts`). Handler starts and ends go to stdout as history lines, and the provider is
 * the run's own HTTP server, so both land in the run's single history even when this process is
 * killed the next instant.
 */
import { createHash } from 'node:crypto';
import { Body, ConsoleLogger, Controller, Get, Inject, Post } from '@nestjs/common';
import { Idempotent, IdempotencyContext, IdempotencyEvents } from '../../../lib';
import type { TestDatabase } from '../../fixtures/database';
import { createTestApp } from '../../fixtures/test-app';
import type { AdapterName } from '../../fixtures/test-app';
import { instance, report } from './history-report-line';
import {
  CreateJobEffects1764028800101,
  HistoryEffectJob,
  StagedPayment,
  StagedPaymentsController,
} from './history-staged';
import {
  CreateWebhookEffects1764028800102,
  WebhookEventsController,
} from './history-webhook-route';

const sha256 = (data: string) => createHash('sha256').update(data).digest('hex');
let runs = 0;

/** The run's provider: a charge keyed by the derived key (the provider dedupes it). */
async function charge(derivedKey: string, key: string): Promise<void> {
  const response = await fetch(`${process.env.HISTORY_PROVIDER_URL}/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ derivedKey, key }),
  });
  if (!response.ok) throw new Error(`the provider answered ${response.status}`);
}

interface PaymentBody {
  amount: number;
}

/** The handler's own time, so duplicates meet it in flight and faults land mid-handler. */
const work = () => new Promise((resolve) => setTimeout(resolve, 30 + Math.random() * 120));

@Controller('payments')
class PaymentsController {
  constructor(@Inject(IdempotencyContext) private readonly idempotency: IdempotencyContext) {}

  @Post('tx')
  @Idempotent({ execution: { transactional: true } })
  async transactional(@Body() body: PaymentBody) {
    return this.handle(body, async (key) => {
      const [row] = await this.idempotency.entityManager.query(
        'INSERT INTO orders (amount, note) VALUES ($1, $2) RETURNING id',
        [body.amount, key],
      );
      return row.id as number;
    });
  }

  @Post('plain')
  @Idempotent()
  async plain(@Body() body: PaymentBody) {
    return this.handle(body, async () => undefined);
  }

  private async handle(body: PaymentBody, write: (key: string) => Promise<number | undefined>) {
    const key = this.idempotency.identity!.key;
    const run = `${instance}:${++runs}`;
    report({
      type: 'handler-start',
      key,
      run,
      instance,
      requestHash: sha256(JSON.stringify(body)),
    });
    try {
      await work();
      await charge(this.idempotency.derivedKey('charge'), key);
      const order = await write(key);
      return { key, amount: body.amount, order, charge: this.idempotency.derivedKey('charge') };
    } finally {
      report({ type: 'handler-end', run });
    }
  }
}

@Controller('health')
class HealthController {
  @Get()
  health() {
    return { status: 'ok' };
  }
}

async function main(): Promise<void> {
  const url = process.env.DATABASE_URL!;
  const app = await createTestApp(
    process.env.HTTP_ADAPTER as AdapterName,
    { url } as TestDatabase,
    {
      databaseUrl: url,
      controllers: [
        PaymentsController,
        StagedPaymentsController,
        WebhookEventsController,
        HealthController,
      ],
      providers: [StagedPayment, HistoryEffectJob],
      migrations: [CreateJobEffects1764028800101, CreateWebhookEffects1764028800102],
      // The webhook route checks its signature over the raw body.
      rawBody: true,
      // Errors on stderr: the run reads the exception handler's, the cause of a 5xx with no code.
      logger: new ConsoleLogger({ logLevels: ['error'] }),
      module: {
        replayCache: false,
        execution: { lockTimeoutSeconds: Number(process.env.IDEMPOTENCY_LOCK_TIMEOUT_SECONDS) },
        wait: { maxSeconds: 5 },
      },
    },
  );
  app.app.get(IdempotencyEvents).subscribe((event) => {
    const final = event.type === 'executed' && !event.stored && event.status < 500;
    if (final) report({ type: 'not-stored', key: event.key, instance, status: event.status });
    if (event.type === 'lock_lost') report({ type: 'lock-lost', key: event.key, instance });
  });
  await app.app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
  const { port } = app.app.getHttpServer().address() as { port: number };
  process.stdout.write(`Listening on http://localhost:${port} (${process.env.HTTP_ADAPTER})\n`);
}

main().catch((error) => {
  process.stderr.write(`history app failed to start: ${error?.stack ?? error}\n`);
  process.exit(1);
});

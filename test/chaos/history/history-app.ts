/**
 * The history run's app: payments on `@Idempotent()` routes, one transactional (its order row is
 * the local effect), one plain (its only effect is the provider's charge, keyed by the derived
 * key). Every instance of a run shares one `Ledger`, so handler starts and ends and provider
 * charges land in the run's single history beside the clients' answers.
 */
import { Body, Controller, Inject, Post } from '@nestjs/common';
import { Idempotent, IdempotencyContext, IdempotencyEvents } from '../../../lib';
import type { TestDatabase } from '../../fixtures/database';
import { createTestApp } from '../../fixtures/test-app';
import type { AdapterName, TestApp } from '../../fixtures/test-app';
import { HistoryRecorder } from './history-recorder';

/** The run's history, and a provider whose charges are keyed by the derived key. */
export class Ledger {
  readonly history = new HistoryRecorder();
  private readonly charges = new Set<string>();

  charge(derivedKey: string, key: string): void {
    const created = !this.charges.has(derivedKey);
    this.charges.add(derivedKey);
    this.history.providerCharge(derivedKey, created, key);
  }
}

const INSTANCE = 'HISTORY_INSTANCE';
export interface PaymentBody {
  amount: number;
}

/** The handler's own time, so duplicates meet it in flight and a failover can land mid-handler. */
const work = () => new Promise((resolve) => setTimeout(resolve, 30 + Math.random() * 120));

@Controller('payments')
class PaymentsController {
  constructor(
    @Inject(Ledger) private readonly ledger: Ledger,
    @Inject(INSTANCE) private readonly instance: string,
    @Inject(IdempotencyContext) private readonly idempotency: IdempotencyContext,
  ) {}

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
    const ended = this.ledger.history.handlerStart(key, this.instance, body);
    try {
      await work();
      this.ledger.charge(this.idempotency.derivedKey('charge'), key);
      const order = await write(key);
      return { key, amount: body.amount, order, charge: this.idempotency.derivedKey('charge') };
    } finally {
      ended();
    }
  }
}

/** A running instance: its name, its adapter and the base URL clients send to. */
export interface HistoryInstance {
  name: string;
  adapter: AdapterName;
  url: string;
  app: TestApp;
}

/** Lease of in-flight requests: short, so a key held by a handler cut off by the failover frees soon. */
export const LEASE_SECONDS = 2;

/** Starts one instance on `databaseUrl` (the moving endpoint), listening on a free port. */
export async function startInstance(
  name: string,
  adapter: AdapterName,
  databaseUrl: string,
  ledger: Ledger,
): Promise<HistoryInstance> {
  const app = await createTestApp(adapter, { url: databaseUrl } as TestDatabase, {
    databaseUrl,
    controllers: [PaymentsController],
    providers: [
      { provide: Ledger, useValue: ledger },
      { provide: INSTANCE, useValue: name },
    ],
    module: {
      replayCache: false,
      execution: { lockTimeoutSeconds: LEASE_SECONDS },
      wait: { maxSeconds: 5 },
    },
  });
  app.app.get(IdempotencyEvents).subscribe((event) => {
    const final = event.type === 'executed' && !event.stored && event.status < 500;
    if (final) ledger.history.notStored(event.key, name, event.status);
  });
  await app.app.listen(0, '127.0.0.1');
  const { port } = app.app.getHttpServer().address() as { port: number };
  return { name, adapter, url: `http://127.0.0.1:${port}`, app };
}

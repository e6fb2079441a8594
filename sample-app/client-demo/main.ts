import { Logger } from '@nestjs/common';
import { createIdempotentClient } from '../../lib/client';
import type { IdempotentResponse } from '../../lib/client';
import { ACCOUNT_HEADER } from '../accounts/account-id';
import { loadSampleAppConfig } from '../config/sample-app.config';
import { createSampleApp } from '../sample-app.factory';
import { LossyProxy } from './lossy-proxy';

/**
 * `npm run sample:client`: the retrying client (`nest-idempotency/client`) creating payments in
 * the sample app through a proxy that loses answers after the server acted and lets requests
 * hang; then, per operation, how many charges the provider holds. Starts its own sample app on a
 * free port (embedded PGlite unless DATABASE_URL is set). CLIENT_DEMO_OPERATIONS (default 40),
 * CLIENT_DEMO_LOSE_RATE (0.2) and CLIENT_DEMO_HANG_RATE (0.1) change the run.
 */
async function main(): Promise<void> {
  const operations = Number(process.env.CLIENT_DEMO_OPERATIONS ?? 40);
  const loseRate = Number(process.env.CLIENT_DEMO_LOSE_RATE ?? 0.2);
  const hangRate = Number(process.env.CLIENT_DEMO_HANG_RATE ?? 0.1);
  const sample = await createSampleApp({ ...loadSampleAppConfig(process.env), port: 0 });
  await sample.app.listen(0, '127.0.0.1');
  const server = await sample.app.getUrl();
  const { port } = new URL(server.replace('[::1]', '127.0.0.1'));
  const proxy = await LossyProxy.start({
    target: { host: '127.0.0.1', port: Number(port) },
    loseRate,
    hangRate,
  });
  const run = Date.now().toString(36);
  const log = new Logger('ClientDemo');
  log.log(
    `${operations} payments through ${proxy.url} (answers lost: ${loseRate * 100} %, ` +
      `hanging: ${hangRate * 100} %) to the sample at ${server}`,
  );

  const client = createIdempotentClient({
    baseUrl: proxy.url,
    headers: { [ACCOUNT_HEADER]: 'acct_demo' },
    attemptTimeoutMs: 2_000,
    backoffMs: 100,
    retries: 8,
  });
  const answers: IdempotentResponse<{ id?: string }>[] = [];
  const failures: string[] = [];
  const customer = (i: number) => `cus_demo_${run}_${i}`;
  for (let i = 0; i < operations; i += 8) {
    const batch = Array.from({ length: Math.min(8, operations - i) }, (_, j) =>
      client
        .post<{ id?: string }>('/payments', {
          amount: 1000 + i + j,
          currency: 'eur',
          customerId: customer(i + j),
        })
        .then(
          (answer) => answers.push(answer),
          (error: Error) => failures.push(error.message),
        ),
    );
    await Promise.all(batch);
  }

  const perOperation = new Map<number, number>();
  for (let i = 0; i < operations; i++) {
    const charges = await fetch(`${server}/provider/charges?customerId=${customer(i)}`, {
      headers: { [ACCOUNT_HEADER]: 'acct_demo' },
    }).then((response) => response.json() as Promise<unknown[]>);
    perOperation.set(charges.length, (perOperation.get(charges.length) ?? 0) + 1);
  }
  const attempts = answers.reduce((sum, answer) => sum + answer.attempts, 0);
  const statuses = countBy(answers.map((answer) => String(answer.status)));
  const fates = proxy.counts();
  console.log(
    [
      '',
      `operations:            ${operations}`,
      `answers:               ${answers.length} (${describe(statuses)}), ${failures.length} without an answer`,
      `replayed answers:      ${answers.filter((answer) => answer.replayed).length}`,
      `attempts:              ${attempts} (${fates.lose} answers lost, ${fates.hang} hung, ${fates.pass} delivered)`,
      `charges per operation: ${describe(new Map([...perOperation].map(([n, c]) => [`${n} charge${n === 1 ? '' : 's'}`, c])))}`,
      '',
    ].join('\n'),
  );
  await proxy.close();
  await sample.close();
}

function countBy(values: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return counts;
}

function describe(counts: Map<string, number>): string {
  return [...counts].map(([value, count]) => `${value} × ${count}`).join(', ');
}

main().catch((error: unknown) => {
  new Logger('ClientDemo').error('Failed', error as Error);
  process.exit(1);
});

// Copied into each packaging app as src/payments.client.ts: built by the app's `nest build`
// (strict, the app's own module resolution) and run against the app by the packaging test.
import { createIdempotentClient } from 'nest-idempotency/client';
import type { IdempotentResponse } from 'nest-idempotency/client';

/**
 * Creates one payment (the README's body: amount and currency) twice with one key through
 * `nest-idempotency/client`, with the README's API key `key_1`, and prints what came back as
 * JSON: `[{ status, replayed, attempts, sameKey, body }, …]`.
 */
export async function main(url: string): Promise<void> {
  const client = createIdempotentClient({
    baseUrl: url,
    retries: 2,
    headers: { 'X-Api-Key': 'key_1' },
  });
  const payment = { amount: 1500, currency: 'eur' };
  const answers: IdempotentResponse<unknown>[] = [];
  for (let i = 0; i < 2; i++) {
    answers.push(await client.post('/payments', payment, { idempotencyKey: 'client-1' }));
  }
  const summary = answers.map((answer) => ({
    status: answer.status,
    replayed: answer.replayed,
    attempts: answer.attempts,
    sameKey: answer.idempotencyKey === 'client-1',
    body: answer.body,
  }));
  process.stdout.write(JSON.stringify(summary));
}

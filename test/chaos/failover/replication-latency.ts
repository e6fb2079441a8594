/**
 * What replication costs a first execution: sequential first requests (fresh keys) to a plain
 * route (the claim and the completion, each its own commit, the handler writing nothing) and to
 * a transactional route (the claim, then the handler's insert and the completion in one
 * commit), through a Nest app (Express) on the primary of a {@link PostgresPair} of each setup:
 * asynchronous, synchronous (`synchronous_commit = on`, the default) and synchronous with
 * `remote_apply`. Each round makes a pair per setup and interleaves the requests across setups
 * (in a rotated order) and routes. Quoted in docs/running-in-production.md#failover.
 *
 *   npx ts-node --transpile-only test/chaos/failover/replication-latency.ts --rounds 3 --requests 200
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Controller, Module, Post } from '@nestjs/common';
import { Idempotent, IdempotencyContext, IdempotencyModule } from '../../../lib';
import { median } from '../../../bench/runner/latency-stats';
import { startApp, testTypeOrmModule } from '../../fixtures/test-app';
import { PostgresPair, query } from './postgres-pair';

type Setup = 'async' | 'sync' | 'sync, remote_apply';
type Route = 'plain' | 'transactional';
const SETUPS: Setup[] = ['async', 'sync', 'sync, remote_apply'];
const ROUTES: Route[] = ['plain', 'transactional'];

@Controller('pay')
class PayController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  @Post('plain')
  @Idempotent()
  plain() {
    return { paid: true };
  }

  @Post('transactional')
  @Idempotent({ execution: { transactional: true } })
  async transactional() {
    const [row] = await this.idempotency.entityManager.query(
      'INSERT INTO orders (amount) VALUES (500) RETURNING id',
    );
    return { order: row.id };
  }
}

/** Nearest-rank percentile of sorted values. */
const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];

/** A pair of the setup and an app on its primary, listening; `close()` removes both. */
async function openSetup(setup: Setup): Promise<{ base: string; close(): Promise<void> }> {
  const pair = await PostgresPair.create(setup === 'async' ? 'async' : 'sync');
  try {
    if (setup === 'sync, remote_apply') {
      await query(pair.url('primary'), "ALTER SYSTEM SET synchronous_commit = 'remote_apply'");
      await query(pair.url('primary'), 'SELECT pg_reload_conf()');
    }
    @Module({
      imports: [
        testTypeOrmModule(pair.url('primary')),
        IdempotencyModule.forRoot({ purge: false }),
      ],
      controllers: [PayController],
    })
    class LatencyModule {}
    const app = await startApp('express', LatencyModule);
    await app.listen(0, '127.0.0.1');
    await pair.waitForReplica();
    const [standby] = await query(
      pair.url('primary'),
      'SELECT sync_state FROM pg_stat_replication',
    );
    const [commit] = await query(pair.url('primary'), 'SHOW synchronous_commit');
    console.error(
      `${setup}: standby ${standby?.sync_state}, synchronous_commit ${commit.synchronous_commit}`,
    );
    const base = await app.getUrl();
    return { base, close: async () => (await app.close(), await pair.remove()) };
  } catch (error) {
    await pair.remove();
    throw error;
  }
}

/** One first execution of `route`, in milliseconds. */
async function firstExecution(base: string, route: Route): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${base}/pay/${route}`, {
    method: 'POST',
    headers: { 'Idempotency-Key': randomUUID(), 'Content-Type': 'application/json' },
    body: '{}',
  });
  await response.arrayBuffer();
  const ms = performance.now() - started;
  if (response.status !== 201) throw new Error(`${route}: ${response.status}`);
  return ms;
}

/**
 * One round: a pair of each setup at once, the requests interleaved across setups and routes
 * (so the machine's load drifts over all alike). Milliseconds by setup and route.
 */
async function round(index: number, requests: number, warmUp: number) {
  const opened = new Map<Setup, { base: string; close(): Promise<void> }>();
  try {
    for (const setup of SETUPS) opened.set(setup, await openSetup(setup));
    const order = SETUPS.map((_, i) => SETUPS[(i + index) % SETUPS.length]);
    const times = new Map<string, number[]>();
    for (let i = 0; i < warmUp + requests; i++) {
      for (const setup of order) {
        for (const route of ROUTES) {
          const ms = await firstExecution(opened.get(setup)!.base, route);
          const name = `${setup} | ${route}`;
          if (i >= warmUp) times.set(name, [...(times.get(name) ?? []), ms]);
        }
      }
    }
    return times;
  } finally {
    for (const { close } of opened.values()) await close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      requests: { type: 'string', default: '200' },
      'warm-up': { type: 'string', default: '20' },
    },
  });
  const rounds = Number(values.rounds);
  const results = new Map<string, { p50: number[]; p95: number[]; all: number[] }>();
  for (let index = 0; index < rounds; index++) {
    const times = await round(index, Number(values.requests), Number(values['warm-up']));
    for (const [name, ms] of times) {
      const sorted = [...ms].sort((a, b) => a - b);
      const entry = results.get(name) ?? { p50: [], p95: [], all: [] };
      entry.p50.push(percentile(sorted, 0.5));
      entry.p95.push(percentile(sorted, 0.95));
      entry.all.push(...sorted);
      results.set(name, entry);
      console.error(`round ${index + 1} ${name}: p50 ${entry.p50.at(-1)!.toFixed(2)} ms`);
    }
  }
  const fixed = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(', ');
  for (const [name, { p50, p95, all }] of results) {
    const pooled = [...all].sort((a, b) => a - b);
    console.log(
      `${name}: median ${median(p50).toFixed(2)} ms (rounds ${fixed(p50)}), ` +
        `p95 ${median(p95).toFixed(2)} ms (rounds ${fixed(p95)}), ` +
        `pooled p50 ${percentile(pooled, 0.5).toFixed(2)} p95 ${percentile(pooled, 0.95).toFixed(2)} (n=${all.length})`,
    );
  }
  // The load drifts between rounds far more than replication costs: compare within a round.
  for (const setup of SETUPS.slice(1)) {
    for (const route of ROUTES) {
      const own = results.get(`${setup} | ${route}`)!.p50;
      const base = results.get(`async | ${route}`)!.p50;
      const deltas = own.map((p50, i) => p50 - base[i]);
      console.log(
        `${setup} | ${route}: median minus async's, same round: median ${median(deltas).toFixed(2)} ms (rounds ${fixed(deltas)})`,
      );
    }
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});

import { randomUUID } from 'node:crypto';
import { connect, createServer } from 'node:net';
import type { AddressInfo, Server } from 'node:net';
import { parseArgs } from 'node:util';
import { DataSource } from 'typeorm';
import type { EntityManager } from 'typeorm';
import type { StoredResponse } from '../lib/interfaces/idempotency-record.interface';
import { TypeOrmIdempotencyStore } from '../lib/storage/typeorm';
import { median } from './runner/latency-stats';

/**
 * What a transactional route's completion costs in round trips, measured at the store:
 * `BEGIN`, the handler's insert, the completion and `COMMIT`, with the completion answered
 * before the `COMMIT` is sent (`complete()` then `commit()`) and sent with it
 * (`completeAndCommit()`), in interleaved blocks, through a TCP proxy that delays every chunk
 * by `--delay-ms` each way (a network between the app and PostgreSQL; 0: no proxy).
 *
 *   npx ts-node --transpile-only bench/transaction-round-trips.ts --delay-ms 1
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'delay-ms': { type: 'string', default: '1' },
      blocks: { type: 'string', default: '10' },
      'per-block': { type: 'string', default: '50' },
    },
  });
  const delayMs = Number(values['delay-ms']);
  const url = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/bench');
  const proxy = delayMs > 0 ? await delayingProxy(new URL(url), delayMs) : undefined;
  if (proxy) {
    url.hostname = '127.0.0.1';
    url.port = String((proxy.address() as AddressInfo).port);
  }
  const dataSource = new DataSource({ type: 'postgres', url: url.toString(), extra: { max: 2 } });
  await dataSource.initialize();
  try {
    await dataSource.query(
      'CREATE TABLE IF NOT EXISTS bench_round_trips (id serial PRIMARY KEY, note text)',
    );
    const store = new TypeOrmIdempotencyStore(dataSource, 'idempotency_records');
    const times: Record<Way, number[]> = { 'answered first': [], 'with the COMMIT': [] };
    const ways = Object.keys(times) as Way[];
    for (const way of ways) for (let i = 0; i < 20; i++) await oneTransaction(store, way);
    for (let block = 0; block < Number(values.blocks); block++) {
      for (const way of block % 2 === 0 ? ways : [...ways].reverse()) {
        for (let i = 0; i < Number(values['per-block']); i++) {
          times[way].push(await oneTransaction(store, way));
        }
      }
    }
    const [before, after] = ways.map((way) => median(times[way]));
    console.log(
      `delay ${delayMs} ms each way; ms from BEGIN to committed, median of ${times[ways[0]].length}:`,
    );
    for (const way of ways) console.log(`  completion ${way}: ${median(times[way]).toFixed(2)}`);
    console.log(`  with the COMMIT / answered first: ${(after / before).toFixed(2)}×`);
  } finally {
    await dataSource.destroy();
    proxy?.close();
  }
}

type Way = 'answered first' | 'with the COMMIT';

const RESPONSE: StoredResponse = {
  status: 201,
  headers: { 'content-type': 'application/json; charset=utf-8' },
  body: Buffer.from('{"id":1,"amount":100,"note":"bench"}'),
};

/** One claimed key's transaction, timed from `BEGIN` to its commit, in ms. */
async function oneTransaction(store: TypeOrmIdempotencyStore, way: Way): Promise<number> {
  const ref = {
    scope: '',
    key: `round-trips-${randomUUID()}`,
    fingerprint: 'f'.repeat(64),
    method: 'POST',
    path: '/round-trips',
    ownerToken: randomUUID(),
    lockTimeoutSeconds: 60,
    ttlSeconds: 3600,
  };
  await store.claim(ref);
  const started = performance.now();
  const tx = await store.beginTransaction();
  await (tx.manager as EntityManager).query('INSERT INTO bench_round_trips (note) VALUES ($1)', [
    ref.key,
  ]);
  const owned =
    way === 'with the COMMIT' && tx.completeAndCommit
      ? await tx.completeAndCommit(ref, RESPONSE, 3600)
      : (await tx.complete(ref, RESPONSE, 3600)) && (await tx.commit(), true);
  if (!owned) throw new Error('the completion found the record taken over');
  return performance.now() - started;
}

/** A TCP proxy to the database that delays every chunk by `delayMs` in each direction. */
function delayingProxy(target: URL, delayMs: number): Promise<Server> {
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ]) {
      from.setNoDelay(true);
      // Timers of one duration fire in the order they were set: the stream keeps its order.
      from.on('data', (chunk) => setTimeout(() => to.write(chunk), delayMs));
      from.on('close', () => to.destroy());
      from.on('error', () => to.destroy());
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

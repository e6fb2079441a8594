import { randomUUID } from 'node:crypto';
import {
  Body,
  Controller,
  Header,
  Headers,
  HttpCode,
  Post,
  Query,
  ServiceUnavailableException,
} from '@nestjs/common';
import type { OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { Client, Pool } from 'pg';
import { DataSource } from 'typeorm';
import { wakeUpChannelOf } from '../../lib/storage/typeorm/typeorm-wake-ups';
import { wakeTokenOf } from '../../lib/waiting/wake-token';
import { BenchEntriesService } from './bench-entries.service';
import type { BenchEntry } from './bench-entry';
import { parseBenchEntryInput } from './bench-entry';
import { floorQueries } from './floor-statements';
import type { FloorQueries } from './floor-statements';
import { WAIT_STORM_MAX_SECONDS } from './wait-storm.routes';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The waiters of one key on this process, and the one read of its answer they share. */
interface HeldKey {
  key: string;
  resolve: (entry: Promise<BenchEntry>) => void;
  answer: Promise<BenchEntry>;
  settled: boolean;
}

/**
 * `POST /wait-floor`: the wake-up floor of the wait-storm phase, with no idempotency library —
 * what any design pays, on this machine, to answer the waiters of a key once it settles. The
 * library's claim for a new key (its own statement) decides who runs: the winner waits
 * `holdMs`, inserts the row, completes the record with the library's completion statement and
 * announces it with `pg_notify` on the library's channel (the runner's listener times the
 * commit from it), then answers its own process's waiters with the row in memory. Every other
 * request holds (no claim again, no poll) until its process's own listening connection receives
 * the key's notification; then one read of the stored body per key and process, shared by all
 * of its waiters, and every waiter answers 201 with it and `Preference-Applied`. So the floor
 * has one round trip per key on the other process and none on the completing one: fewer than
 * any claim-again design.
 */
@Controller('wait-floor')
export class WaitFloorController implements OnModuleInit, OnModuleDestroy {
  private readonly held = new Map<string, HeldKey>();
  private readonly channel = wakeUpChannelOf('idempotency_records');
  private readonly queries: FloorQueries;
  private listener?: Client;

  constructor(
    private readonly dataSource: DataSource,
    private readonly entries: BenchEntriesService,
  ) {
    this.queries = floorQueries(dataSource);
  }

  private get pool(): Pool & { Client: new (options: object) => Client; options: any } {
    return (this.dataSource.driver as unknown as { master: any }).master;
  }

  /** Opens this process's listening connection (the pool's settings). */
  async onModuleInit(): Promise<void> {
    const pool = this.pool;
    const client = new pool.Client({ ...pool.options, password: pool.options.password });
    await client.connect();
    client.on('notification', ({ channel, payload }) => {
      if (channel !== this.channel || !payload) return;
      const held = this.held.get(payload);
      if (held) this.settle(payload, () => this.read(held.key));
    });
    // Quoted, so the runner's count of the library's listening connections leaves it out.
    await client.query(`LISTEN "${this.channel}"`);
    this.listener = client;
  }

  /** Closes the listening connection. */
  async onModuleDestroy(): Promise<void> {
    await this.listener?.end().catch(() => undefined);
  }

  /** The first request of a key runs and completes it; the others hold until it settles. */
  @Post()
  @HttpCode(201)
  @Header('preference-applied', `wait=${WAIT_STORM_MAX_SECONDS}`)
  async create(
    @Headers('idempotency-key') key: string,
    @Query('holdMs') raw: string | undefined,
    @Body() body: unknown,
  ): Promise<BenchEntry> {
    const token = wakeTokenOf('', key);
    const owner = randomUUID();
    const held = this.hold(token, key);
    const claimed = await this.pool.query(this.queries.claimFresh(key, owner, '/wait-floor'));
    if (claimed.rowCount !== 1) {
      const timeout = setTimeout(() => this.settle(token, () => this.read(key)), 10_000);
      try {
        return await held.answer;
      } finally {
        clearTimeout(timeout);
      }
    }
    await sleep(Number(raw ?? 0));
    const entry = await this.entries.insert(parseBenchEntryInput(body));
    await this.pool.query(this.queries.complete(key, owner, entry));
    await this.pool.query('SELECT pg_notify($1, $2)', [this.channel, token]);
    this.settle(token, () => Promise.resolve(entry));
    return entry;
  }

  private hold(token: string, idempotencyKey: string): HeldKey {
    let key = this.held.get(token);
    if (!key) {
      let resolve!: HeldKey['resolve'];
      const answer = new Promise<Promise<BenchEntry>>((r) => (resolve = r)).then((p) => p);
      key = { key: idempotencyKey, resolve, answer, settled: false };
      this.held.set(token, key);
    }
    return key;
  }

  /** The key settled: its waiters here answer with `answer()`, read once. */
  private settle(token: string, answer: () => Promise<BenchEntry>): void {
    const key = this.held.get(token);
    if (!key || key.settled) return;
    key.settled = true;
    key.resolve(answer());
    // Later requests of the key (none in the phase) start over.
    setTimeout(() => this.held.delete(token), 1_000).unref();
  }

  /** One read of the key's stored answer. */
  private async read(key: string): Promise<BenchEntry> {
    const { rows } = await this.pool.query(
      `SELECT response_body FROM idempotency_records WHERE scope = '' AND idempotency_key = $1`,
      [key],
    );
    if (!rows[0]?.response_body) throw new ServiceUnavailableException();
    return JSON.parse(rows[0].response_body.toString('utf8')) as BenchEntry;
  }
}

import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { IdempotencyContext } from '../../lib';
import type { BenchEntry, BenchEntryInput } from './bench-entry';

const INSERT_ENTRY = `
  INSERT INTO bench_entries (amount, note) VALUES ($1, $2)
  RETURNING id, amount, note, created_at AS "createdAt"`;

/** The one handler body of the bench app: insert a row and return it. */
@Injectable()
export class BenchEntriesService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly idempotency: IdempotencyContext,
  ) {}

  /**
   * Inserts on a pooled connection (autocommit).
   * @returns the inserted row
   */
  async insert(input: BenchEntryInput): Promise<BenchEntry> {
    const rows = await this.dataSource.query(INSERT_ENTRY, [input.amount, input.note ?? null]);
    return rows[0];
  }

  /**
   * Inserts in a transaction of its own (`BEGIN; insert; COMMIT`): what a transactional
   * idempotent route replaces.
   * @returns the inserted row
   */
  insertInOwnTransaction(input: BenchEntryInput): Promise<BenchEntry> {
    return this.dataSource.transaction(async (manager) => {
      const rows = await manager.query(INSERT_ENTRY, [input.amount, input.note ?? null]);
      return rows[0];
    });
  }

  /**
   * Inserts through the transaction of an `@Idempotent({ transactional: true })` request, the
   * one that also stores its response.
   * @returns the inserted row
   * @throws IdempotencyError outside a transactional idempotent handler
   */
  async insertInTransaction(input: BenchEntryInput): Promise<BenchEntry> {
    const rows = await this.idempotency.entityManager.query(INSERT_ENTRY, [
      input.amount,
      input.note ?? null,
    ]);
    return rows[0];
  }
}

import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { EntityManager } from 'typeorm';
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
    return this.dataSource.transaction((manager) => this.insertWith(manager, input));
  }

  /**
   * Inserts through the transaction of an `@Idempotent({ execution: { transactional: true } })` request, the
   * one that also stores its response.
   * @returns the inserted row
   * @throws IdempotencyError outside a transactional idempotent handler
   */
  insertInTransaction(input: BenchEntryInput): Promise<BenchEntry> {
    return this.insertWith(this.idempotency.entityManager, input);
  }

  /**
   * Inserts through `manager` (in whatever transaction it has open).
   * @returns the inserted row
   */
  async insertWith(manager: EntityManager, input: BenchEntryInput): Promise<BenchEntry> {
    const rows = await manager.query(INSERT_ENTRY, [input.amount, input.note ?? null]);
    return rows[0];
  }
}

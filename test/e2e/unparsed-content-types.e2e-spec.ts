/**
 * Bodies of a content type nobody parsed are refused (415) and warned about once per media type —
 * with bounded memory and log volume, whatever clients send: at most
 * `MAX_UNPARSED_TYPES_LOGGED` media types, then one line saying further ones are not logged; a
 * line never carries the raw header (which may be kilobytes). On Express the library refuses
 * them; on Fastify, Fastify does (no parser for the type), and nothing is logged.
 */
import { Logger } from '@nestjs/common';
import request from 'supertest';
import { MAX_UNPARSED_TYPES_LOGGED } from '../../lib/utils/unparsed-content-types';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

/** Distinct media types sent, each with a long parameter. */
const TYPES = 3 * MAX_UNPARSED_TYPES_LOGGED;

describe.each(ADAPTERS)('unparsed content types on %s', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let warnLog: jest.SpyInstance;
  let n = 0;

  const post = (contentType: string) =>
    request(t.server)
      .post('/orders/any')
      .set('Idempotency-Key', `unparsed-${adapter}-${++n}`)
      .set('Content-Type', contentType)
      .send('amount=100');
  /** The warnings about unparsed bodies. */
  const warnings = () =>
    warnLog.mock.calls.map((call) => String(call[0])).filter((line) => line.includes('415'));

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db);
    warnLog = jest.spyOn(Logger.prototype, 'warn');
  });
  afterAll(async () => {
    warnLog?.mockRestore();
    await t?.close();
    await db?.drop();
  });

  it('warns once per media type, for a bounded number of types, never with the raw header', async () => {
    const padding = 'x'.repeat(4000);
    for (let i = 0; i < TYPES; i++) {
      for (const variant of ['a', 'b']) {
        // Two headers per media type, differing only in their (long) parameters.
        const res = await post(`application/x-type-${i}; v="${variant}${padding}"`);
        expect(res.status).toBe(415);
      }
    }
    expect(t.probe.ran('any')).toBe(0);

    const lines = warnings();
    if (adapter === 'express') {
      expect(lines).toHaveLength(MAX_UNPARSED_TYPES_LOGGED + 1);
      for (let i = 0; i < MAX_UNPARSED_TYPES_LOGGED; i++) {
        expect(lines[i]).toContain(`"application/x-type-${i}"`);
      }
      expect(lines[MAX_UNPARSED_TYPES_LOGGED]).toMatch(/further types are not logged/);
    } else {
      expect(lines).toEqual([]);
    }
    for (const line of lines) {
      expect(line).not.toContain(padding.slice(0, 100));
      expect(line.length).toBeLessThan(500);
    }

    // Nothing more is logged, whatever comes next.
    await post('application/x-type-last').expect(415);
    expect(warnings()).toHaveLength(lines.length);
  });
});

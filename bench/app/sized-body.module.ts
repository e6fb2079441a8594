import { randomBytes } from 'node:crypto';
import { BadRequestException, Body, Controller, Module, Param, Post } from '@nestjs/common';
import type { DynamicModule, Type } from '@nestjs/common';
import { IdempotencyModule, Idempotent } from '../../lib';
import type { IdempotencyModuleOptions } from '../../lib';
import { BenchEntriesService } from './bench-entries.service';
import type { BenchEntry } from './bench-entry';
import { parseBenchEntryInput } from './bench-entry';
import { SIZED_BODY_PREFIXES } from './sized-body.routes';

/** The inserted row, padded so that its JSON is `bytes` long (or its natural size, if longer). */
export interface SizedBenchEntry extends BenchEntry {
  pad: string;
}

function padded(entry: BenchEntry, bytes: number): SizedBenchEntry {
  const bare = Buffer.byteLength(JSON.stringify({ ...entry, pad: '' }));
  return { ...entry, pad: 'x'.repeat(Math.max(0, bytes - bare)) };
}

/** A controller at `/<prefix>/:bytes`: the bench handler (insert a row), answered padded. */
function sizedController(prefix: string): Type {
  @Controller(prefix)
  class SizedBodyController {
    constructor(private readonly entries: BenchEntriesService) {}

    /** `POST /<prefix>/:bytes`: the row inserted, as a JSON body of `bytes` bytes. */
    @Post(':bytes')
    @Idempotent()
    async create(@Param('bytes') raw: string, @Body() body: unknown): Promise<SizedBenchEntry> {
      const bytes = Number(raw);
      if (!Number.isInteger(bytes) || bytes < 0 || bytes > 1_048_576) {
        throw new BadRequestException('bytes must be an integer from 0 to 1048576');
      }
      return padded(await this.entries.insert(parseBenchEntryInput(body)), bytes);
    }
  }
  return SizedBodyController;
}

/**
 * A module of its own (an `IdempotencyModule` instance with `isGlobal: false`) serving
 * `POST /<prefix>/:bytes`: the same handler and options on two instances, one with `encryption`
 * and one without, so the phase compares them on one server. The replay cache is off, so a
 * replay reads and (sealed) opens the record every time, as one from another instance would;
 * a replay from the cache costs the same with or without encryption.
 */
function sizedBodyModule(prefix: string, options: IdempotencyModuleOptions): DynamicModule {
  @Module({})
  class SizedBodyModule {}
  Object.defineProperty(SizedBodyModule, 'name', { value: `SizedBody_${prefix}_Module` });
  return {
    module: SizedBodyModule,
    imports: [
      IdempotencyModule.forRoot({ isGlobal: false, purge: false, replayCache: false, ...options }),
    ],
    controllers: [sizedController(prefix)],
    providers: [BenchEntriesService],
  };
}

/**
 * The modules of the encryption phase: `/sized/:bytes` without encryption and `/sealed/:bytes`
 * with one key (random per process: its records live only as long as the run).
 */
export function sizedBodyModules(): DynamicModule[] {
  return [
    sizedBodyModule(SIZED_BODY_PREFIXES.clear, {}),
    sizedBodyModule(SIZED_BODY_PREFIXES.sealed, {
      encryption: { keys: [{ id: 'bench', secret: randomBytes(32) }] },
    }),
  ];
}

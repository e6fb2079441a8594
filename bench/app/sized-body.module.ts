import { BadRequestException, Body, Controller, Module, Param, Post } from '@nestjs/common';
import type { DynamicModule, Type } from '@nestjs/common';
import { Idempotent } from '../../lib';
import type { BenchIdempotencyConfig } from './bench-app.config';
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
 * The encryption phase's route on a server whose one idempotency configuration is `clear`
 * (`POST /sized/:bytes`) or `sealed` (`POST /sealed/:bytes`): the same handler and route options
 * on two servers whose configurations differ only in `encryption` (`benchIdempotencyOptions()`),
 * the route named after its server's, so a request sent to the wrong server gets a 404 rather than
 * a measure of the other configuration. None on other servers.
 */
export function sizedBodyModules(config: BenchIdempotencyConfig): DynamicModule[] {
  if (config !== 'clear' && config !== 'sealed') return [];
  const prefix = SIZED_BODY_PREFIXES[config];
  @Module({})
  class SizedBodyModule {}
  Object.defineProperty(SizedBodyModule, 'name', { value: `SizedBody_${prefix}_Module` });
  return [
    {
      module: SizedBodyModule,
      controllers: [sizedController(prefix)],
      providers: [BenchEntriesService],
    },
  ];
}

import { Body, Controller, Post } from '@nestjs/common';
import { Idempotent } from '../../lib';
import type { BenchEntry } from './bench-entry';
import { parseBenchEntryInput } from './bench-entry';
import { BenchEntriesService } from './bench-entries.service';

/** The same insert mounted three times: bare, idempotent, idempotent and transactional. */
@Controller()
export class BenchController {
  constructor(private readonly entries: BenchEntriesService) {}

  /** `POST /plain`: no idempotency, the baseline. */
  @Post('plain')
  plain(@Body() body: unknown): Promise<BenchEntry> {
    return this.entries.insert(parseBenchEntryInput(body));
  }

  /** `POST /idempotent`: claimed, stored and replayed by the library. */
  @Post('idempotent')
  @Idempotent()
  idempotent(@Body() body: unknown): Promise<BenchEntry> {
    return this.entries.insert(parseBenchEntryInput(body));
  }

  /** `POST /idempotent-tx`: the insert commits with the stored response. */
  @Post('idempotent-tx')
  @Idempotent({ execution: { transactional: true } })
  idempotentTransactional(@Body() body: unknown): Promise<BenchEntry> {
    return this.entries.insertInTransaction(parseBenchEntryInput(body));
  }
}

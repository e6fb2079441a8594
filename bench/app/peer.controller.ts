import { Body, Controller, Post } from '@nestjs/common';
import { Idempotent as PeerIdempotent } from '@node-idempotency/nestjs';
import type { BenchEntry } from './bench-entry';
import { parseBenchEntryInput } from './bench-entry';
import { BenchEntriesService } from './bench-entries.service';

/** `POST /peer`: the same insert behind `@node-idempotency/nestjs` and its Redis store. */
@Controller()
export class PeerController {
  constructor(private readonly entries: BenchEntriesService) {}

  /** The peer's decorator; the key is required so a missing one is a 400, as on ours. */
  @Post('peer')
  @PeerIdempotent({ enforceIdempotency: true })
  peer(@Body() body: unknown): Promise<BenchEntry> {
    return this.entries.insert(parseBenchEntryInput(body));
  }
}

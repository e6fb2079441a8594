import { Body, Controller, Post, UseInterceptors } from '@nestjs/common';
import type { BenchEntry } from '../app/bench-entry';
import { parseBenchEntryInput } from '../app/bench-entry';
import { BenchEntriesService } from '../app/bench-entries.service';
import { DurableIdempotencyInterceptor } from './durable-idempotency.interceptor';

/** `POST /durable`: the same insert behind the blog-style durable peer. */
@Controller()
export class DurablePeerController {
  constructor(private readonly entries: BenchEntriesService) {}

  @Post('durable')
  @UseInterceptors(DurableIdempotencyInterceptor)
  durable(@Body() body: unknown): Promise<BenchEntry> {
    return this.entries.insert(parseBenchEntryInput(body));
  }
}

import { BadRequestException } from '@nestjs/common';

/** The body every bench route takes. */
export interface BenchEntryInput {
  amount: number;
  note?: string;
}

/** The row the handler inserted, as answered with 201. */
export interface BenchEntry {
  id: number;
  amount: number;
  note: string | null;
  createdAt: string;
}

/**
 * Checks a request body by hand: a ValidationPipe would cost the same on every route, and the
 * bench measures what the idempotency layer adds.
 *
 * @throws BadRequestException when `amount` is not an integer or `note` not a string
 */
export function parseBenchEntryInput(body: unknown): BenchEntryInput {
  const input = (body ?? {}) as Record<string, unknown>;
  if (!Number.isInteger(input.amount)) {
    throw new BadRequestException('amount must be an integer');
  }
  if (input.note !== undefined && typeof input.note !== 'string') {
    throw new BadRequestException('note must be a string');
  }
  return { amount: input.amount as number, note: input.note as string | undefined };
}

import {
  BadRequestException,
  ConflictException,
  Injectable,
  UnprocessableEntityException,
} from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { createHash } from 'node:crypto';
import { from, of, mergeMap } from 'rxjs';
import type { Observable } from 'rxjs';
import { QueryFailedError, Repository } from 'typeorm';
import { DurableKeyEntity } from './durable-key.entity';

/**
 * The durable peer: idempotency the way a team writes it from a "NestJS + PostgreSQL idempotency
 * keys" blog post, without this library. A TypeORM repository: `findOne` by key — a completed
 * record is replayed (its status and JSON body), one in progress is a 409, another request hash
 * a 422 — else `insert` the record (a unique violation is a 409), run the handler, `update` the
 * record with the response. No lease, no purge, no byte-exact replay: it is what the library is
 * compared with, not a recommendation.
 */
@Injectable()
export class DurableIdempotencyInterceptor implements NestInterceptor {
  constructor(
    @InjectRepository(DurableKeyEntity) private readonly keys: Repository<DurableKeyEntity>,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest();
    const response = http.getResponse();
    const key = request.headers['idempotency-key'];
    if (typeof key !== 'string' || key === '') throw new BadRequestException('Idempotency-Key');
    const requestHash = createHash('sha256').update(JSON.stringify(request.body)).digest('hex');
    return from(this.keys.findOne({ where: { key } })).pipe(
      mergeMap((existing) => {
        if (existing) {
          if (existing.requestHash !== requestHash) throw new UnprocessableEntityException();
          if (existing.status !== 'completed') throw new ConflictException();
          setStatus(response, existing.responseStatus ?? 200);
          return of(existing.responseBody);
        }
        return from(this.start(key, requestHash)).pipe(
          mergeMap(() => next.handle()),
          mergeMap(async (body) => {
            await this.keys.update(
              { key },
              { status: 'completed', responseStatus: statusOf(response), responseBody: body },
            );
            return body;
          }),
        );
      }),
    );
  }

  private async start(key: string, requestHash: string): Promise<void> {
    try {
      await this.keys.insert({ key, requestHash, status: 'processing' });
    } catch (error) {
      const code = (error as QueryFailedError & { driverError?: { code?: string } }).driverError
        ?.code;
      if (error instanceof QueryFailedError && code === '23505') throw new ConflictException();
      throw error;
    }
  }
}

function setStatus(response: any, status: number): void {
  if (typeof response.code === 'function') response.code(status);
  else response.status(status);
}

function statusOf(response: any): number {
  return response.statusCode ?? 201;
}

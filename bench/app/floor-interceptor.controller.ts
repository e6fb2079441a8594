import {
  Body,
  ConflictException,
  Controller,
  Injectable,
  Post,
  UseGuards,
  UseInterceptors,
} from '@nestjs/common';
import type { CallHandler, CanActivate, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { Observable, concatMap } from 'rxjs';
import { DataSource } from 'typeorm';
import type { BenchEntry } from './bench-entry';
import { parseBenchEntryInput } from './bench-entry';
import { BenchEntriesService } from './bench-entries.service';
import {
  FLOOR_FINGERPRINT,
  FLOOR_HEADERS,
  FLOOR_LEASE_SECONDS,
  FLOOR_TTL_SECONDS,
  storeStatements,
} from './floor-statements';

/** Lets a request through when it carries a key: the guard's place in Nest's pipeline, no more. */
@Injectable()
class FloorKeyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return typeof context.switchToHttp().getRequest().headers['idempotency-key'] === 'string';
  }
}

/**
 * The floor's two statements sent from a bare interceptor: the claim before the handler, the
 * completion after it (`concatMap`, awaited before the response goes out). No fingerprint, no
 * lease, no response hook, no AsyncLocalStorage, no events: what Nest's guard and interceptor
 * pipeline (and rxjs) add to the floor, which any interceptor-based library pays.
 */
@Injectable()
class FloorInterceptor implements NestInterceptor {
  private readonly statements: ReturnType<typeof storeStatements>;

  constructor(private readonly dataSource: DataSource) {
    this.statements = storeStatements(dataSource);
  }

  private get pool(): Pool {
    return (this.dataSource.driver as unknown as { master: Pool }).master;
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const key = context.switchToHttp().getRequest().headers['idempotency-key'] as string;
    const owner = randomUUID();
    return new Observable((subscriber) => {
      this.pool
        .query({
          ...this.statements.claimFresh,
          values: [
            '',
            key,
            FLOOR_FINGERPRINT,
            owner,
            FLOOR_LEASE_SECONDS,
            FLOOR_TTL_SECONDS,
            randomUUID(),
            'POST',
            '/floor-interceptor',
          ],
        })
        .then((claimed) => {
          if (claimed.rowCount !== 1) throw new ConflictException();
          next
            .handle()
            .pipe(
              concatMap(async (entry) => {
                await this.pool.query({
                  ...this.statements.complete,
                  values: [
                    '',
                    key,
                    owner,
                    201,
                    FLOOR_HEADERS,
                    Buffer.from(JSON.stringify(entry)),
                    FLOOR_TTL_SECONDS,
                  ],
                });
                return entry;
              }),
            )
            .subscribe(subscriber);
        })
        .catch((error: unknown) => subscriber.error(error));
    });
  }
}

/** `POST /floor-interceptor`: the floor's statements from a guard and an interceptor. */
@Controller()
export class FloorInterceptorController {
  constructor(private readonly entries: BenchEntriesService) {}

  @Post('floor-interceptor')
  @UseGuards(FloorKeyGuard)
  @UseInterceptors(FloorInterceptor)
  create(@Body() body: unknown): Promise<BenchEntry> {
    return this.entries.insert(parseBenchEntryInput(body));
  }
}

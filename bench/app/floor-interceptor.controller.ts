import {
  Body,
  ConflictException,
  Controller,
  Injectable,
  Post,
  Req,
  UseGuards,
  UseInterceptors,
} from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { Observable, catchError, concatMap, finalize, from } from 'rxjs';
import type { QueryRunner } from 'typeorm';
import type { BenchEntry } from './bench-entry';
import { parseBenchEntryInput } from './bench-entry';
import { BenchEntriesService } from './bench-entries.service';
import { FloorInterceptorBase, FloorKeyGuard } from './floor-interceptor.base';

/**
 * The floor's two statements sent from a bare interceptor: the claim before the handler, the
 * completion after it (`concatMap`, awaited before the response goes out). No fingerprint, no
 * lease, no response hook, no AsyncLocalStorage, no events: what Nest's guard and interceptor
 * pipeline (and rxjs) add to the floor, which any interceptor-based library pays.
 */
@Injectable()
class FloorInterceptor extends FloorInterceptorBase {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const key = context.switchToHttp().getRequest().headers['idempotency-key'] as string;
    const owner = randomUUID();
    return new Observable((subscriber) => {
      this.pool
        .query(this.queries.claimFresh(key, owner, '/floor-interceptor'))
        .then((claimed) => {
          if (claimed.rowCount !== 1) throw new ConflictException();
          next
            .handle()
            .pipe(
              concatMap(async (entry) => {
                await this.pool.query(this.queries.complete(key, owner, entry));
                return entry;
              }),
            )
            .subscribe(subscriber);
        })
        .catch((error: unknown) => subscriber.error(error));
    });
  }
}

/** How many storm keys the storm floor's interceptor remembers before it starts afresh. */
const STORM_FLOOR_KEYS = 10_000;

/**
 * The same-key storm's floor from a bare interceptor: the first request with a key runs its
 * handler; every later request with that key is refused by a `ConflictException` thrown from
 * the interceptor, through Nest's exception filter (the key stays taken: the route answers
 * storms, nothing else). No store, no fingerprint, no events: what any interceptor-based layer
 * pays for a 409 it decides alone, against `/storm-floor`'s 409 returned by a bare handler.
 */
@Injectable()
class StormFloorInterceptor implements NestInterceptor {
  private readonly taken = new Set<string>();

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const key = context.switchToHttp().getRequest().headers['idempotency-key'] as string;
    if (this.taken.has(key)) throw new ConflictException();
    if (this.taken.size >= STORM_FLOOR_KEYS) this.taken.clear();
    this.taken.add(key);
    return next.handle();
  }
}

/** Where the transactional floor's interceptor leaves the request's query runner for its handler. */
const FLOOR_RUNNER = Symbol('bench:floor-runner');

/**
 * The transactional floor from a bare interceptor: the claim on its own, then a transaction on a
 * TypeORM query runner (`startTransaction()`), the handler's insert through the runner's
 * `EntityManager` (handed over on the request object), the completion on the runner's pg client
 * and `commitTransaction()`, before the response goes out. What any interceptor that commits the
 * response with the handler's writes pays: the transactional route's floor, as
 * `/floor-interceptor` is the first execution's. No fingerprint, no lease, no response hook, no
 * AsyncLocalStorage, no events.
 */
@Injectable()
class FloorTransactionInterceptor extends FloorInterceptorBase {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest();
    const key = request.headers['idempotency-key'] as string;
    const owner = randomUUID();
    return new Observable((subscriber) => {
      this.pool
        .query(this.queries.claimFresh(key, owner, '/floor-tx-interceptor'))
        .then(async (claimed) => {
          if (claimed.rowCount !== 1) throw new ConflictException();
          const runner = this.dataSource.createQueryRunner();
          await runner.connect();
          await runner.startTransaction();
          request[FLOOR_RUNNER] = runner;
          next
            .handle()
            .pipe(
              concatMap(async (entry) => {
                const client = (runner as unknown as { databaseConnection: PoolClient })
                  .databaseConnection;
                await client.query(this.queries.complete(key, owner, entry));
                await runner.commitTransaction();
                return entry;
              }),
              catchError((error: unknown) =>
                from(rollBack(runner).then(() => Promise.reject(error))),
              ),
              finalize(() => void runner.release()),
            )
            .subscribe(subscriber);
        })
        .catch((error: unknown) => subscriber.error(error));
    });
  }
}

/** Rolls back what is still open of a failed request's transaction. */
async function rollBack(runner: QueryRunner): Promise<void> {
  if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
}

/**
 * `POST /floor-interceptor`: the floor's statements from a guard and an interceptor;
 * `POST /storm-floor-interceptor`: the storm's.
 */
@Controller()
export class FloorInterceptorController {
  constructor(private readonly entries: BenchEntriesService) {}

  @Post('floor-interceptor')
  @UseGuards(FloorKeyGuard)
  @UseInterceptors(FloorInterceptor)
  create(@Body() body: unknown): Promise<BenchEntry> {
    return this.entries.insert(parseBenchEntryInput(body));
  }

  /** `POST /storm-floor-interceptor`: the storm's floor from a guard and an interceptor. */
  @Post('storm-floor-interceptor')
  @UseGuards(FloorKeyGuard)
  @UseInterceptors(StormFloorInterceptor)
  stormFloor(@Body() body: unknown): Promise<BenchEntry> {
    return this.entries.insert(parseBenchEntryInput(body));
  }

  /** `POST /floor-tx-interceptor`: the transactional floor from a guard and an interceptor. */
  @Post('floor-tx-interceptor')
  @UseGuards(FloorKeyGuard)
  @UseInterceptors(FloorTransactionInterceptor)
  createInTransaction(
    @Req() request: { [FLOOR_RUNNER]: QueryRunner },
    @Body() body: unknown,
  ): Promise<BenchEntry> {
    return this.entries.insertWith(request[FLOOR_RUNNER].manager, parseBenchEntryInput(body));
  }
}

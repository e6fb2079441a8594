import { AsyncLocalStorage } from 'node:async_hooks';
import { hash, randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import {
  Body,
  ConflictException,
  Controller,
  Injectable,
  Post,
  UseGuards,
  UseInterceptors,
} from '@nestjs/common';
import type { CallHandler, ExecutionContext } from '@nestjs/common';
import type { PoolClient } from 'pg';
import { Observable } from 'rxjs';
import type { EntityManager } from 'typeorm';
import type { BenchEntry } from './bench-entry';
import { parseBenchEntryInput } from './bench-entry';
import { BenchEntriesService } from './bench-entries.service';
import { FloorInterceptorBase, FloorKeyGuard } from './floor-interceptor.base';
import { FLOOR_LEASE_SECONDS } from './floor-statements';
import type { FloorQuery } from './floor-statements';

/** What the contract floor's handler reads from its request context. */
interface ContractContext {
  /** Set by the handler: a request refused before it (a pipe's 400) would not be stored. */
  started: boolean;
  /** The transaction the response is committed in, on the transactional route. */
  manager?: EntityManager;
}

const CONTEXT = new AsyncLocalStorage<ContractContext>();

/**
 * Contract-floor requests between their claim and their completion. The storage is turned off
 * when the last one ends, as the library turns its own off: on Node 20 a storage left on makes
 * every promise of the process pay async hooks, so the cases measured after this one (the other
 * floors, the peers, the library) would pay them too.
 */
let live = 0;

function ended(): void {
  if (--live === 0) CONTEXT.disable();
}

/** The handler's side of the contract: it marks itself started and finds its transaction. */
function startedContext(): ContractContext {
  const context = CONTEXT.getStore();
  if (!context) throw new Error('contract floor: no request context');
  context.started = true;
  return context;
}

/**
 * Canonical JSON (object keys sorted), the fingerprint's body part, in a few lines: a retry whose
 * body lists the same fields in another order is the same request.
 */
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonical(record[key])}`).join(',')}}`;
}

/**
 * The floor from an interceptor plus what the behaviour contract asks of any implementation on
 * every first execution, each done the cheapest way: the fingerprint (canonical JSON and
 * SHA-256 of method, path and body), a request context for the handler (AsyncLocalStorage: the
 * started mark, the transaction), a lease renewal timer while the handler runs, and the response
 * held at the wire (`end`) until its status, content type and exact bytes are stored. No events,
 * metrics, replay cache, scopes or options, and the key only checked for presence (as the
 * floor's guard does). The success path only, as the other
 * floors: a 409 for a key taken, nothing released on failure.
 */
@Injectable()
abstract class ContractFloorBase extends FloorInterceptorBase {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest();
    const response = http.getResponse();
    const key = request.headers['idempotency-key'] as string;
    const path = request.originalUrl ?? request.url;
    const fingerprint = hash('sha256', `${request.method}\n${path}\n${canonical(request.body)}`);
    const owner = randomUUID();
    return new Observable((subscriber) => {
      this.pool
        .query(this.queries.claimFresh(key, owner, path, fingerprint))
        .then((claimed) => {
          if (claimed.rowCount !== 1) throw new ConflictException();
          return this.begin();
        })
        .then((unit) => {
          // Renewed at a third of the lease while the handler runs (never fires here).
          const lease = setTimeout(() => undefined, (FLOOR_LEASE_SECONDS * 1000) / 3);
          live++;
          holdUntilStored(response, (status, headers, body) => {
            clearTimeout(lease);
            const finished = unit.finish(
              this.queries.completeWith(key, owner, status, headers, body),
            );
            finished.then(ended, ended);
            return finished;
          });
          const started = { started: false, manager: unit.manager };
          CONTEXT.run(started, () => next.handle().subscribe(subscriber));
        })
        .catch((error: unknown) => subscriber.error(error));
    });
  }

  /** Opens what the handler writes in (nothing, or a transaction) and how it is finished. */
  protected abstract begin(): Promise<ContractUnit>;
}

/** Where a contract floor's handler writes, and how its completion is stored. */
interface ContractUnit {
  manager?: EntityManager;
  /** Stores the completion (and commits what was opened) before the response goes out. */
  finish(completion: FloorQuery): Promise<unknown>;
}

/**
 * Holds the response's last write (`end`, where Express's and Fastify's sends finish) until
 * `store` has kept its status, content type and bytes.
 */
function holdUntilStored(
  response: { raw?: ServerResponse; getHeader(name: string): unknown },
  store: (status: number, headers: string, body: Buffer) => Promise<unknown>,
): void {
  const raw = response.raw ?? (response as unknown as ServerResponse);
  const end = raw.end;
  raw.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
    const body = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk ?? ''));
    const headers = JSON.stringify({ 'content-type': response.getHeader('content-type') });
    store(raw.statusCode, headers, body).then(
      () => end.apply(raw, [chunk, ...rest] as Parameters<ServerResponse['end']>),
      () => raw.destroy(),
    );
    return raw;
  } as ServerResponse['end'];
}

/** `/floor-contract`: the completion on the pool. */
@Injectable()
class ContractFloorInterceptor extends ContractFloorBase {
  protected begin(): Promise<ContractUnit> {
    return Promise.resolve({ finish: (completion) => this.pool.query(completion) });
  }
}

/**
 * `/floor-contract-tx`: the handler's insert, the completion and the commit in one transaction
 * on a TypeORM query runner, as `/floor-tx-interceptor`, the runner given through the context.
 */
@Injectable()
class ContractFloorTransactionInterceptor extends ContractFloorBase {
  protected async begin(): Promise<ContractUnit> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    const client = (runner as unknown as { databaseConnection: PoolClient }).databaseConnection;
    return {
      manager: runner.manager,
      finish: (completion) =>
        client
          .query(completion)
          .then(() => runner.commitTransaction())
          .finally(() => runner.release()),
    };
  }
}

/** The contract floors' routes: the same handler body as every bench route. */
@Controller()
export class ContractFloorController {
  constructor(private readonly entries: BenchEntriesService) {}

  /** `POST /floor-contract`: the floor from an interceptor, and what the contract adds to it. */
  @Post('floor-contract')
  @UseGuards(FloorKeyGuard)
  @UseInterceptors(ContractFloorInterceptor)
  create(@Body() body: unknown): Promise<BenchEntry> {
    startedContext();
    return this.entries.insert(parseBenchEntryInput(body));
  }

  /** `POST /floor-contract-tx`: the same, the response committed with the handler's insert. */
  @Post('floor-contract-tx')
  @UseGuards(FloorKeyGuard)
  @UseInterceptors(ContractFloorTransactionInterceptor)
  createInTransaction(@Body() body: unknown): Promise<BenchEntry> {
    const { manager } = startedContext();
    return this.entries.insertWith(manager!, parseBenchEntryInput(body));
  }
}

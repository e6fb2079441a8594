import { Injectable } from '@nestjs/common';
import type { CallHandler, CanActivate, ExecutionContext, NestInterceptor } from '@nestjs/common';
import type { Pool } from 'pg';
import type { Observable } from 'rxjs';
import { DataSource } from 'typeorm';
import { floorQueries } from './floor-statements';
import type { FloorQueries } from './floor-statements';

/** Lets a request through when it carries a key: the guard's place in Nest's pipeline, no more. */
@Injectable()
export class FloorKeyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return typeof context.switchToHttp().getRequest().headers['idempotency-key'] === 'string';
  }
}

/** The floor interceptors' pool and statements. */
@Injectable()
export abstract class FloorInterceptorBase implements NestInterceptor {
  protected readonly queries: FloorQueries;

  constructor(protected readonly dataSource: DataSource) {
    this.queries = floorQueries(dataSource);
  }

  protected get pool(): Pool {
    return (this.dataSource.driver as unknown as { master: Pool }).master;
  }

  abstract intercept(context: ExecutionContext, next: CallHandler): Observable<unknown>;
}

import { Injectable } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import { ExpressResponseAdapter } from './express-response.adapter';
import { FastifyResponseAdapter } from './fastify-response.adapter';
import type { IdempotencyResponseAdapter } from './idempotency-response.adapter';

/**
 * Picks the response adapter of the application's HTTP adapter. Looked up at the first request:
 * a testing module's providers are created before its application (and adapter) exists.
 */
@Injectable()
export class ResponseAdapterResolver {
  private adapter?: IdempotencyResponseAdapter;

  constructor(private readonly host: HttpAdapterHost) {}

  /**
   * @throws IdempotencyConfigurationError for an HTTP adapter other than Express or Fastify
   */
  get(): IdempotencyResponseAdapter {
    if (this.adapter) return this.adapter;
    const type = this.host.httpAdapter?.getType();
    if (type === 'express') this.adapter = new ExpressResponseAdapter();
    else if (type === 'fastify') this.adapter = new FastifyResponseAdapter();
    else throw IdempotencyConfigurationError.unsupportedHttpAdapter(String(type));
    return this.adapter;
  }
}

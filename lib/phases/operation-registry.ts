import { Injectable } from '@nestjs/common';
import type { Type } from '@nestjs/common';
import { DiscoveryService, Reflector } from '@nestjs/core';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import { IDEMPOTENCY_JOB_HANDLER_METADATA } from './jobs/idempotent-job-handler.decorator';
import type { IdempotencyJobHandlerInstance } from './jobs/staged-job.interface';
import { IDEMPOTENT_OPERATION_METADATA } from './idempotent-operation.decorator';
import type { IdempotencyOperation, OperationStep } from './operation-step';

/** An operation found in the application, with its checked steps. */
export interface RegisteredOperation {
  readonly name: string;
  readonly steps: ReadonlyArray<OperationStep>;
}

const RESERVED_POINTS = new Set(['started', 'finished']);

/**
 * What discovery found: the operations, by name (a record may name one that was removed since)
 * and by class, and the job handlers by name.
 */
interface Discovered {
  readonly operations: ReadonlyMap<string, RegisteredOperation>;
  readonly byClass: ReadonlyMap<Type, RegisteredOperation>;
  readonly jobHandlers: ReadonlyMap<string, IdempotencyJobHandlerInstance>;
}

/**
 * The `@IdempotentOperation()` and `@IdempotentJobHandler()` providers of the application,
 * found through Nest's discovery the first time they are asked for (every provider exists by
 * then), so the completer and the drainer can run them without an HTTP request.
 */
@Injectable()
export class IdempotencyOperationRegistry {
  private found?: Discovered;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly reflector: Reflector,
  ) {}

  /**
   * The operation of that name or class.
   * @throws IdempotencyConfigurationError when there is none
   */
  operation(ref: string | Type<IdempotencyOperation>): RegisteredOperation {
    const { operations, byClass } = this.discover();
    const found = typeof ref === 'string' ? operations.get(ref) : byClass.get(ref);
    if (!found) throw IdempotencyConfigurationError.operationNotRegistered(ref);
    return found;
  }

  /**
   * Checks that every foreign step fits in a lease: its `timeoutSeconds` plus `marginSeconds`
   * at most `lockTimeoutSeconds` (a route with a shorter lease is refused when the step runs).
   * @throws IdempotencyConfigurationError naming the step and the numbers
   */
  checkForeignSteps(lockTimeoutSeconds: number, marginSeconds: number): void {
    for (const operation of this.discover().operations.values()) {
      for (const step of operation.steps) {
        if (step.kind !== 'foreign') continue;
        const needs = step.options.timeoutSeconds + marginSeconds;
        if (needs <= lockTimeoutSeconds) continue;
        throw IdempotencyConfigurationError.invalidOperation(
          operation.name,
          `foreign step "${step.name}" needs ${needs} s of lease (timeoutSeconds ` +
            `${step.options.timeoutSeconds} + foreignStepMarginSeconds ${marginSeconds}), ` +
            `more than execution.lockTimeoutSeconds (${lockTimeoutSeconds}): raise it or ` +
            'lower the step timeout',
        );
      }
    }
  }

  /**
   * Finds and checks every operation and job handler, once; later calls return what it found.
   * @throws IdempotencyConfigurationError on a duplicate name or a malformed operation
   */
  discover(): Discovered {
    if (this.found) return this.found;
    const operations = new Map<string, RegisteredOperation>();
    const byClass = new Map<Type, RegisteredOperation>();
    const jobHandlers = new Map<string, IdempotencyJobHandlerInstance>();
    for (const wrapper of this.discovery.getProviders()) {
      const { instance } = wrapper;
      const metatype = wrapper.metatype as Type | null;
      if (!metatype || typeof metatype !== 'function' || !instance) continue;
      const operationName = this.reflector.get<string>(IDEMPOTENT_OPERATION_METADATA, metatype);
      if (operationName !== undefined && !byClass.has(metatype)) {
        if (operations.has(operationName)) {
          throw IdempotencyConfigurationError.duplicateName('operation', operationName);
        }
        const registered = checkOperation(operationName, instance as IdempotencyOperation);
        operations.set(operationName, registered);
        byClass.set(metatype, registered);
      }
      const jobName = this.reflector.get<string>(IDEMPOTENCY_JOB_HANDLER_METADATA, metatype);
      if (jobName !== undefined && jobHandlers.get(jobName) !== instance) {
        if (jobHandlers.has(jobName)) {
          throw IdempotencyConfigurationError.duplicateName('job handler', jobName);
        }
        if (typeof (instance as IdempotencyJobHandlerInstance).handle !== 'function') {
          throw IdempotencyConfigurationError.invalidOperation(
            jobName,
            'a job handler needs a handle(job, manager) method',
          );
        }
        jobHandlers.set(jobName, instance as IdempotencyJobHandlerInstance);
      }
    }
    return (this.found = { operations, byClass, jobHandlers });
  }
}

function checkOperation(name: string, instance: IdempotencyOperation): RegisteredOperation {
  const invalid = (problem: string) =>
    IdempotencyConfigurationError.invalidOperation(name, problem);
  const steps = instance.steps;
  if (!Array.isArray(steps) || steps.length === 0) {
    throw invalid('it needs a non-empty steps array');
  }
  const seen = new Set<string>();
  for (const step of steps) {
    if (!step || (step.kind !== 'local' && step.kind !== 'foreign')) {
      throw invalid('build the steps with defineSteps()');
    }
    if (typeof step.name !== 'string' || step.name === '' || step.name.length > 200) {
      throw invalid('a step needs a name of 1–200 characters');
    }
    if (RESERVED_POINTS.has(step.name) || seen.has(step.name)) {
      throw invalid(
        `step name "${step.name}" is ${seen.has(step.name) ? 'used twice' : 'reserved'}`,
      );
    }
    seen.add(step.name);
    if (
      step.kind === 'foreign' &&
      !(typeof step.options?.timeoutSeconds === 'number' && step.options.timeoutSeconds > 0)
    ) {
      throw invalid(`foreign step "${step.name}" needs a positive timeoutSeconds`);
    }
  }
  return { name, steps };
}

/**
 * The history app's staged jobs: `POST /payments/staged` runs an operation in phases whose one
 * local step stages a `history_effect` job named by the request's key and answers 201. The job's
 * handler writes one row in `job_effects` through the drainer's transaction; the table has no
 * unique key, so a second application of one job shows as a second row on the final primary.
 * Each delivery goes to the run as a `job-delivery` history line.
 */
import { Body, Controller, Post } from '@nestjs/common';
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { Idempotent } from '../../../lib';
import {
  IdempotentJobHandler,
  IdempotentOperation,
  IdempotencyOperations,
  defineSteps,
  respond,
} from '../../../lib/phases';
import type { IdempotencyJobHandlerInstance, StagedJob } from '../../../lib/phases';
import { instance, report } from './history-report-line';

interface StagedBody {
  amount: number;
}

/** The job's arguments: the request key it was staged for (its name in the history). */
interface EffectArgs {
  ref: string;
}

/** The job handler's effect table: deliberately no unique key on `ref` or `job_key`. */
export class CreateJobEffects1764028800101 implements MigrationInterface {
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE IF NOT EXISTS job_effects (
      id serial PRIMARY KEY, ref text NOT NULL, job_key text NOT NULL)`);
  }
  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE job_effects');
  }
}

/** One local step: stage the effect job, answer 201 (both commit together). */
@IdempotentOperation('history.staged')
export class StagedPayment {
  readonly steps = defineSteps<StagedBody, object, unknown>((step) => [
    step.local('staged', async ({ identity, input, stage }) => {
      await stage('history_effect', { ref: identity.key });
      return respond(201, { key: identity.key, amount: input.amount, staged: true });
    }),
  ]);
}

/** Writes the job's effect in the drainer's transaction: it commits exactly with the delivery. */
@IdempotentJobHandler('history_effect')
export class HistoryEffectJob implements IdempotencyJobHandlerInstance<EffectArgs> {
  async handle(job: StagedJob<EffectArgs>, manager: any): Promise<void> {
    report({ type: 'job-delivery', job: job.args.ref, instance });
    await manager.query('INSERT INTO job_effects (ref, job_key) VALUES ($1, $2)', [
      job.args.ref,
      job.key,
    ]);
  }
}

@Controller('payments')
export class StagedPaymentsController {
  constructor(private readonly operations: IdempotencyOperations) {}

  @Post('staged')
  @Idempotent()
  staged(@Body() body: StagedBody) {
    return this.operations.run(StagedPayment, body);
  }
}

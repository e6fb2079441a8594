/**
 * Operations in phases are typed end to end: `defineSteps<Input, State, Output>()` gives every
 * step a typed `input` and `state`, checks `proceed()` against `State` and `respond()` against
 * `Output`, and `IdempotencyOperations.run()` takes an `Input` and returns an `Output`. The type
 * checks below are plain code that the compiler judges (`tsc --noEmit` in CI); the last test
 * compiles this file too, so that a wrong type fails the unit run as well.
 */
import { join } from 'node:path';
import * as ts from 'typescript';
import { IdempotentOperation, defineSteps, proceed, respond, retryLater } from '../../lib/phases';
import type {
  IdempotencyOperations,
  OperationInput,
  OperationOutput,
  OperationStep,
} from '../../lib/phases';

/** True when `A` and `B` are the same type (not merely assignable one way). */
type Equal<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/** Compiles only when `Condition` is `true`. */
function assertType<Condition extends true>(proof?: Condition): void {
  void proof;
}

/** `exactly<T>()(value)` compiles only when `value`'s type is `T` itself. */
function exactly<Expected>() {
  return <Actual>(
    value: Actual,
    ...proof: Equal<Actual, Expected> extends true ? [] : ['a different type']
  ): void => {
    void [value, proof];
  };
}

interface RefundInput {
  paymentId: string;
  amount: number;
}

interface RefundState {
  refundId?: string;
  providerRefundId?: string;
}

interface Refund {
  id: string;
  status: 'refunded';
}

interface RefundRefused {
  error: { code: 'refund_refused' };
}

type RefundOutput = Refund | RefundRefused;

@IdempotentOperation('types.refund')
class CreateRefund {
  readonly steps = defineSteps<RefundInput, RefundState, RefundOutput>((step) => [
    step.local('refund_created', async ({ input, state, stage }) => {
      exactly<RefundInput>()(input);
      exactly<RefundState>()(state);
      await stage('audit', { paymentId: input.paymentId });
      return proceed({ refundId: `re_${input.paymentId}` });
    }),
    step.foreign('refunded', { timeoutSeconds: 5 }, async ({ input, state, signal }) => {
      exactly<RefundInput>()(input);
      exactly<RefundState>()(state);
      exactly<AbortSignal>()(signal);
      if (input.amount <= 0) return respond(402, { error: { code: 'refund_refused' } });
      if (signal.aborted) return retryLater('the provider did not answer');
      return proceed({ providerRefundId: 'pr_1' });
    }),
    step.local('finished_refund', async ({ state }) =>
      respond(201, { id: state.refundId ?? '', status: 'refunded' }, { Location: '/refunds' }),
    ),
  ]);
}

/** Never called: what the compiler accepts and refuses around `run()` and the steps. */
export function typeChecks(operations: IdempotencyOperations): void {
  const input: RefundInput = { paymentId: 'pay_1', amount: 5 };

  // run(): the operation's Input in, its Output out.
  const result = operations.run(CreateRefund, input);
  exactly<Promise<RefundOutput>>()(result);
  // @ts-expect-error the check itself: a wider type is not the same type
  exactly<Promise<unknown>>()(result);
  assertType<Equal<OperationInput<CreateRefund>, RefundInput>>();
  assertType<Equal<OperationOutput<CreateRefund>, RefundOutput>>();
  // @ts-expect-error an input that is not the operation's Input
  void operations.run(CreateRefund, { paymentId: 'pay_1' });
  // @ts-expect-error an input field of the wrong type
  void operations.run(CreateRefund, { paymentId: 'pay_1', amount: '5' });
  // A name carries no types.
  const byName = operations.run('types.refund', { anything: true });
  exactly<Promise<unknown>>()(byName);

  defineSteps<RefundInput, RefundState, RefundOutput>((step) => [
    step.local('unknown_input_field', async ({ input }) => {
      // @ts-expect-error input has no such field
      return proceed({ refundId: input.customerId });
    }),
    // @ts-expect-error proceed() carries only State's fields
    step.local('unknown_state_field', async () => proceed({ refundID: 're_1' })),
    // @ts-expect-error proceed() carries State's fields with State's types
    step.local('wrong_state_type', async () => proceed({ refundId: 1 })),
    // @ts-expect-error respond() answers with an Output
    step.foreign('wrong_body', { timeoutSeconds: 1 }, async () => respond(201, { id: 're_1' })),
    // @ts-expect-error a literal of Output must match
    step.local('wrong_literal', async () => respond(402, { error: { code: 'declined' } })),
    step.local('no_state', async () => proceed()),
  ]);
}

describe('operation types', () => {
  it('builds steps in the shape the runner reads: kind, name, options, run', () => {
    const steps: ReadonlyArray<OperationStep> = new CreateRefund().steps;
    expect(steps.map(({ kind, name, options }) => ({ kind, name, options }))).toEqual([
      { kind: 'local', name: 'refund_created', options: {} },
      { kind: 'foreign', name: 'refunded', options: { timeoutSeconds: 5 } },
      { kind: 'local', name: 'finished_refund', options: {} },
    ]);
    expect(steps.every((step) => typeof step.run === 'function')).toBe(true);
    const serializable = defineSteps<RefundInput, RefundState>((step) => [
      step.local('one', async () => proceed(), { isolation: 'SERIALIZABLE' }),
    ]);
    expect(serializable[0].options).toEqual({ isolation: 'SERIALIZABLE' });
  });

  it("runs a step's function as given, with its outcome", async () => {
    const [, refunded] = new CreateRefund().steps;
    const context = {
      input: { paymentId: 'pay_1', amount: 0 },
      state: {},
      signal: new AbortController().signal,
    };
    await expect(refunded.run(context as never)).resolves.toEqual({
      kind: 'respond',
      status: 402,
      body: { error: { code: 'refund_refused' } },
      headers: {},
    });
  });

  it('type-checks: run() and the steps accept and refuse what this file says', () => {
    const root = join(__dirname, '../..');
    const config = ts.readConfigFile(join(root, 'tsconfig.json'), (path) => ts.sys.readFile(path));
    const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
    const program = ts.createProgram([__filename], {
      ...options,
      noEmit: true,
      incremental: false,
    });
    // This file's own diagnostics: an error elsewhere in the project is tsc's to report.
    const diagnostics = ts.getPreEmitDiagnostics(program, program.getSourceFile(__filename));
    const report = ts.formatDiagnostics(diagnostics, {
      getCanonicalFileName: (name) => name,
      getCurrentDirectory: () => root,
      getNewLine: () => '\n',
    });
    expect(report).toBe('');
  });
});

import { Logger } from '@nestjs/common';

/**
 * Where a speed-up that rests on V8's or a framework's private behaviour decides whether it runs.
 *
 * Each trick in lib/internals/ asks `internalEnabled(name)` once, at startup, and checks that the
 * internal it relies on is still there; when either says no it takes its plain path, and
 * `fellBack(name, reason)` says so once. `NEST_IDEMPOTENCY_PLAIN=all` (or a comma-separated list of
 * trick names) forces the plain path: the bench measures each trick with and without it, and the
 * tests run both paths. docs/design/internals.md lists the tricks and their measured gains.
 */
const reported = new Set<string>();

/** Whether the trick `name` may run: not switched off by `NEST_IDEMPOTENCY_PLAIN`. */
export function internalEnabled(name: string): boolean {
  const plain = (process.env.NEST_IDEMPOTENCY_PLAIN ?? '').split(',').map((part) => part.trim());
  return !plain.includes('all') && !plain.includes(name);
}

/** Says once per trick that its internal changed and the plain path is in use. */
export function fellBack(name: string, reason: string): void {
  if (reported.has(name)) return;
  reported.add(name);
  new Logger('Idempotency').warn(
    `Internal speed-up "${name}" is off: ${reason}. The plain path is in use; behaviour is unchanged.`,
  );
}

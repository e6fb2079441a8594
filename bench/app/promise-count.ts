import { createHook } from 'node:async_hooks';

/**
 * Counts the promises the process creates, while on. Off by default: the hook it installs makes
 * every promise slower, so only the promises phase turns it on, last, and off again.
 */
class PromiseCount {
  private created = 0;
  private readonly hook = createHook({
    init: (_id, type) => {
      if (type === 'PROMISE') this.created++;
    },
  });

  /** Promises created since the count was first turned on. */
  get value(): number {
    return this.created;
  }

  /** Turns counting on or off. */
  set(on: boolean): void {
    if (on) this.hook.enable();
    else this.hook.disable();
  }
}

/** The bench server's one count, read and switched through `GET /health?promises=on|off|read`. */
export const promiseCount = new PromiseCount();

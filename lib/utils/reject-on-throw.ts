/**
 * What `call` returns, or its synchronous throw as a rejected promise, for a caller that
 * handles failures in `.then()` alone (a store that throws rather than rejects fails all the
 * same). Unlike `Promise.resolve().then(call)`, `call` runs now and a result that is not a
 * promise stays one: the paths that answer without a promise keep doing so.
 * @param call - what to run now
 */
export function rejectOnThrow<T>(call: () => T): T | Promise<never> {
  try {
    return call();
  } catch (error) {
    return Promise.reject(error);
  }
}

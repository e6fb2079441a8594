/**
 * Replaces one method on one object and returns the function that puts it back: the previous
 * own property if there was one (a middleware such as compression may have set its own), or
 * the prototype's, by deleting ours. Does nothing on restore if someone replaced ours since.
 */
export function hookMethod<T extends object>(
  target: T,
  name: string,
  replacement: (...args: any[]) => unknown,
): () => void {
  const own = Object.getOwnPropertyDescriptor(target, name);
  (target as any)[name] = replacement;
  return () => {
    if ((target as any)[name] !== replacement) return;
    if (own) Object.defineProperty(target, name, own);
    else delete (target as any)[name];
  };
}

/**
 * Makes the named methods of one object return the object and do nothing else. After a replay
 * is written, Nest's router still sends the interceptor's result (`undefined`), and an outer
 * interceptor may set headers: on a response already ended each would throw
 * `ERR_HTTP_HEADERS_SENT` (Express) or log "Reply was already sent" (Fastify). Own properties
 * that shadow the prototype's: public API only.
 */
export function silenceMethods<T extends object>(target: T, names: readonly string[]): void {
  const noop = function (this: unknown) {
    return target;
  };
  for (const name of names) (target as any)[name] = noop;
}

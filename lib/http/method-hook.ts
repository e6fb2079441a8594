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

/** Makes the named methods of one object return the object and do nothing else. */
export function silenceMethods<T extends object>(target: T, names: readonly string[]): void {
  const noop = function (this: unknown) {
    return target;
  };
  for (const name of names) (target as any)[name] = noop;
}

/** For each prototype, and each list of names: that prototype with those methods silenced. */
const silencedPrototypes = new WeakMap<object, Map<readonly string[], object>>();

/**
 * What `silenceMethods` does, for many names at once: the object gets a prototype of its own
 * kind whose methods of those names return the object and do nothing else (built once per
 * prototype and list), instead of one new own property per name. Ten new properties on an
 * Express response cost V8 a new shape on every replay (23 µs of self time per replay in a CPU
 * profile, against 8 µs this way). A method the object holds as its own property (a
 * middleware's `write`) is silenced in place.
 */
export function silenceMethodsByPrototype<T extends object>(
  target: T,
  names: readonly string[],
): void {
  const prototype = Object.getPrototypeOf(target) as object | null;
  if (prototype === null) return silenceMethods(target, names);
  let byNames = silencedPrototypes.get(prototype);
  if (!byNames) silencedPrototypes.set(prototype, (byNames = new Map()));
  let quiet = byNames.get(names);
  if (!quiet) {
    quiet = Object.create(prototype) as object;
    for (const name of names) {
      (quiet as any)[name] = function (this: unknown) {
        return this;
      };
    }
    byNames.set(names, quiet);
  }
  Object.setPrototypeOf(target, quiet);
  for (const name of names) {
    if (Object.prototype.hasOwnProperty.call(target, name)) silenceMethods(target, [name]);
  }
}

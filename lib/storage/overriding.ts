/**
 * `inner` with some of its members replaced, so that a layer decorating a port names only what
 * it adds instead of forwarding each method by hand. Every other member is `inner`'s: its
 * methods run on `inner` itself (bound here, so what they write stays on `inner`), its fields
 * and getters read through (`inner` is the result's prototype), so the result can be handed
 * back to `inner`'s own methods.
 * @param inner - the object decorated
 * @param overrides - the members this layer adds or changes
 */
export function overriding<T extends object>(inner: T, overrides: Partial<T>): T {
  const result = Object.create(inner, Object.getOwnPropertyDescriptors(overrides)) as T;
  for (let of = inner; of && of !== Object.prototype; of = Object.getPrototypeOf(of)) {
    for (const [name, { value }] of Object.entries(Object.getOwnPropertyDescriptors(of))) {
      if (typeof value !== 'function' || name === 'constructor' || Object.hasOwn(result, name)) {
        continue;
      }
      const bound = { value: value.bind(inner), writable: true, configurable: true };
      Object.defineProperty(result, name, bound);
    }
  }
  return result;
}

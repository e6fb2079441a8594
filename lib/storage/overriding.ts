/**
 * `inner` with some of its members replaced. Every other member reads through to `inner` (its
 * prototype), so a layer that decorates a port names only what it adds instead of forwarding
 * each method by hand, and a wrapped object can be handed back to `inner`'s own methods as is.
 * @param inner - the object decorated
 * @param overrides - the members this layer adds or changes
 */
export function overriding<T extends object>(inner: T, overrides: Partial<T>): T {
  return Object.create(inner, Object.getOwnPropertyDescriptors(overrides)) as T;
}

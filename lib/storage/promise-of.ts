/**
 * What `call` returns, or what it throws as a rejection: for callers that chain on a store's
 * promise without an async function around them (one promise fewer on the request path).
 */
export function promiseOf<T>(call: () => Promise<T>): Promise<T> {
  try {
    return call();
  } catch (error) {
    return Promise.reject(error);
  }
}

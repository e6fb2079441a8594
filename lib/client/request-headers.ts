/**
 * The headers of one operation: the body's implied content type, then the client's `headers`,
 * then the request's own, each replacing a header of the same name in any case (HTTP header names
 * are case-insensitive: a request's `content-type` replaces the client's `Content-Type`, it is not
 * sent beside it).
 *
 * @param layers - header sets from the weakest to the strongest; `undefined` ones are skipped
 * @returns one header per name
 */
export function mergeHeaders(...layers: (Record<string, string> | undefined)[]): Headers {
  const headers = new Headers();
  for (const layer of layers) {
    for (const [name, value] of Object.entries(layer ?? {})) headers.set(name, value);
  }
  return headers;
}

/**
 * The operation's key: `idempotencyKey` when given, else the key header the request set itself
 * (in any case), else a new one.
 *
 * @param requestHeaders - the request's own headers (not the client's: a key shared by every
 *   request would make them one operation)
 * @throws TypeError when `idempotencyKey` and the request's key header disagree
 */
export function operationKey(
  idempotencyKey: string | undefined,
  requestHeaders: Record<string, string> | undefined,
  keyHeader: string,
  generateKey: () => string,
): string {
  const fromHeader = new Headers(requestHeaders ?? {}).get(keyHeader) ?? undefined;
  if (idempotencyKey !== undefined && fromHeader !== undefined && fromHeader !== idempotencyKey) {
    throw new TypeError(
      `IdempotentClient: idempotencyKey "${idempotencyKey}" and the request's ${keyHeader} ` +
        `header "${fromHeader}" disagree; give the key once`,
    );
  }
  return idempotencyKey ?? fromHeader ?? generateKey();
}

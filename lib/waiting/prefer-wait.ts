/**
 * The `wait` preference of a request (RFC 7240 §4.3, `Prefer: wait=10`): how many seconds the
 * client is willing to wait for an answer.
 *
 * The header is read as RFC 7240 defines it: a comma-separated list of preferences, each a
 * token, optionally `=` a token or a quoted string, optionally followed by `;` parameters; names
 * are case-insensitive and only the first `wait` counts. A value that is not a whole number of
 * seconds (delta-seconds) makes the request count as having expressed no preference, so a
 * garbled header never turns waiting off nor asks for more than the route allows.
 *
 * @param header - the request's `Prefer` header (several headers arrive joined by commas, or as
 *   an array)
 * @returns the seconds asked for, or `undefined` when the request expresses no readable `wait`
 */
export function preferredWaitSeconds(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join(',') : header;
  // Cheap exit for the common case: no wait preference at all.
  if (!/wait/i.test(text)) return undefined;
  for (const preference of splitOutsideQuotes(text, ',')) {
    const [head] = splitOutsideQuotes(preference, ';');
    const equals = head.indexOf('=');
    const name = (equals < 0 ? head : head.slice(0, equals)).trim().toLowerCase();
    if (name !== 'wait') continue;
    if (equals < 0) return undefined;
    const value = unquote(head.slice(equals + 1).trim());
    return value !== undefined && /^\d{1,15}$/.test(value) ? Number(value) : undefined;
  }
  return undefined;
}

/** `text` cut at each `separator` that is not inside a quoted string. */
function splitOutsideQuotes(text: string, separator: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (quoted && char === '\\') i++;
    else if (char === '"') quoted = !quoted;
    else if (!quoted && char === separator) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/** A token as it is, a quoted string without its quotes and escapes; `undefined` if malformed. */
function unquote(word: string): string | undefined {
  if (!word.startsWith('"')) return word;
  if (word.length < 2 || !word.endsWith('"')) return undefined;
  return word.slice(1, -1).replace(/\\(.)/g, '$1');
}

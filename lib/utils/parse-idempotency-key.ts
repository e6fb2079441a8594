/** Result of reading the key header of one request. */
export type ParsedIdempotencyKey =
  { kind: 'missing' } | { kind: 'invalid'; reason: string } | { kind: 'valid'; key: string };

const MAX_KEY_LENGTH = 255;

/** Printable ASCII only. */
const PRINTABLE = /^[\x20-\x7e]*$/;

/**
 * Unquotes an RFC 8941 sf-string: `"` ... `"` where only `\"` and `\\` are escapes.
 * @returns the unquoted text, or an error reason
 */
function unquote(value: string): { text: string } | { reason: string } {
  // The opening quote, then plain characters and valid escapes up to the first other one.
  const [quoted, body] = /^"((?:[^"\\]|\\["\\])*)/.exec(value)!;
  const next = value[quoted.length];
  if (next === '\\') return { reason: 'a quoted key has a bad escape' };
  if (next === undefined) return { reason: 'a quoted key is not terminated' };
  if (quoted.length + 1 < value.length) {
    return { reason: 'a quoted key has text after its closing quote' };
  }
  return { text: body.replace(/\\(["\\])/g, '$1') };
}

/**
 * Reads the idempotency key from the header values of one request.
 *
 * Accepts a bare value and an RFC 8941 string; both name the same key. Valid keys are 1–255
 * printable ASCII characters after unquoting and trimming; a bare value may not contain a comma;
 * more than one header line is invalid.
 *
 * @param values - every value of the header, one per header line, as received
 * @returns missing, invalid (with a reason that never echoes the key) or the key
 */
export function parseIdempotencyKey(values: readonly string[]): ParsedIdempotencyKey {
  if (values.length === 0) return { kind: 'missing' };
  if (values.length > 1) return { kind: 'invalid', reason: 'the header appears more than once' };
  const raw = values[0].replace(/^[ \t]+|[ \t]+$/g, '');
  if (!PRINTABLE.test(raw)) {
    return { kind: 'invalid', reason: 'the key has characters outside printable ASCII' };
  }
  let key: string;
  if (raw.startsWith('"')) {
    const unquoted = unquote(raw);
    if ('reason' in unquoted) return { kind: 'invalid', reason: unquoted.reason };
    key = unquoted.text.trim();
  } else {
    if (raw.includes(',')) return { kind: 'invalid', reason: 'a bare key may not contain a comma' };
    key = raw;
  }
  if (key.length === 0) return { kind: 'invalid', reason: 'the key is empty' };
  if (key.length > MAX_KEY_LENGTH) {
    return { kind: 'invalid', reason: `the key is longer than ${MAX_KEY_LENGTH} characters` };
  }
  return { kind: 'valid', key };
}

/** What a key carried as a plain value is: 1 to 255 printable ASCII characters. */
const PLAIN_KEY = /^[\x20-\x7e]{1,255}$/;

/**
 * Reads a key carried as a plain value rather than a header (a message's field, a GraphQL
 * argument): taken as it is, with no unquoting or trimming.
 * @param value - the value as its carrier gave it
 * @returns the key, or invalid with a reason that never echoes it
 */
export function parsePlainKey(value: string): ParsedIdempotencyKey {
  if (!PLAIN_KEY.test(value)) {
    return { kind: 'invalid', reason: 'the key is not 1 to 255 printable ASCII characters' };
  }
  return { kind: 'valid', key: value };
}

/**
 * Reads a key carried as a value of any type (a message's field or header, a webhook's event
 * id): a finite number counts as its decimal text; nothing, `null` or `''` is no key.
 * @param value - the value as its carrier gave it
 */
export function parseKeyValue(value: unknown): ParsedIdempotencyKey {
  if (typeof value === 'number' && Number.isFinite(value)) value = String(value);
  if (value === undefined || value === null || value === '') return { kind: 'missing' };
  if (typeof value !== 'string') {
    return { kind: 'invalid', reason: 'the key is not a string or a number' };
  }
  return parsePlainKey(value);
}

/**
 * Collects every value of one header from a Node request, one per header line (so a repeated
 * header is seen as repeated rather than joined with a comma).
 *
 * @param rawHeaders - `IncomingMessage.rawHeaders` (name, value, name, value, ...)
 * @param name - header name, any case
 */
export function headerLines(rawHeaders: readonly string[] | undefined, name: string): string[] {
  const wanted = name.toLowerCase();
  const values: string[] = [];
  if (!rawHeaders) return values;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i].toLowerCase() === wanted) values.push(rawHeaders[i + 1]);
  }
  return values;
}

/**
 * Reads and parses the key of one request (Express or Fastify), one value per header line.
 * @param request - the adapter's request object
 * @param header - the configured header name
 */
export function readIdempotencyKey(request: any, header: string): ParsedIdempotencyKey {
  const rawHeaders: string[] | undefined = request.rawHeaders ?? request.raw?.rawHeaders;
  return parseIdempotencyKey(headerLines(rawHeaders, header));
}

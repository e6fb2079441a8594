/**
 * The `Content-Type` each adapter really writes for a body, worked out before it is written so
 * the stored answer (and so every replay) carries the first answer's header byte for byte. The
 * adapters rewrite the header on the way out, each its own way: Fastify 5 puts `charset=utf-8`
 * only on JSON types and leaves a `text/csv` string alone. (Express's rewriting differs between
 * its versions: its adapter takes the header where Express's own `send` ends the response.)
 */

/** One parameter as Fastify's `ContentType` reads it. */
const FASTIFY_PARAM =
  /(?:^|;)\s*([\w!#$%&'*+.^`|~-]+)=("(?:[\t\u0020\u0021\u0023-\u005b\u005d-\u007e\u0080-\u00ff]|\\[\t\u0020-\u00ff])*"|[\w!#$%&'*+.^`|~-]+)/gu;
const FASTIFY_TYPE_NAME = /^[\w!#$%&'*+.^`|~-]+$/;
const FASTIFY_SUBTYPE_NAME = /^[\w!#$%&'*+.^`|~-]+\s*$/;

function unquote(value: string, escapes: RegExp): string {
  return value.charCodeAt(0) === 0x22 ? value.slice(1, -1).replace(escapes, '$1') : value;
}

/** A content type as Fastify 5's `ContentType` reads it; undefined when it sees none. */
function fastifyParse(
  header: string | undefined,
): { mediaType: string; parameters: Map<string, string> } | undefined {
  if (header === undefined || header === '' || header === 'undefined') return undefined;
  const semicolon = header.indexOf(';');
  const media = (semicolon === -1 ? header : header.slice(0, semicolon)).toLowerCase();
  const slash = media.indexOf('/');
  if (slash === -1) return undefined;
  const type = media.slice(0, slash).trimStart();
  const subtype = media.slice(slash + 1).trimEnd();
  if (!FASTIFY_TYPE_NAME.test(type) || !FASTIFY_SUBTYPE_NAME.test(subtype)) return undefined;
  const parameters = new Map<string, string>();
  if (semicolon !== -1) {
    const list = header.slice(semicolon + 1).trim();
    FASTIFY_PARAM.lastIndex = 0;
    for (let match = FASTIFY_PARAM.exec(list); match; match = FASTIFY_PARAM.exec(list)) {
      parameters.set(match[1].toLowerCase(), unquote(match[2], /\\([\t\u0020-\u00ff])/gu));
    }
  }
  return { mediaType: `${type}/${subtype}`, parameters };
}

/**
 * What Fastify 5's `reply.send` writes for a body it sends as bytes or serializes: bytes keep
 * the route's content type (else `application/octet-stream`); a string keeps it (else
 * `text/plain; charset=utf-8`); under a JSON type (or none, for what it serializes) it adds
 * `charset=utf-8` when the type names no charset, writing the type back its own way.
 *
 * @param kind - `bytes`, `text` (a string) or `serialized` (what Fastify turns into JSON)
 * @param current - the content type set on the reply, if any
 * @returns the header Fastify will write
 */
export function fastifyContentType(
  kind: 'bytes' | 'text' | 'serialized',
  current: string | undefined,
): string {
  const parsed = fastifyParse(current);
  if (!parsed) {
    if (kind === 'bytes') return 'application/octet-stream';
    return kind === 'text' ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8';
  }
  if (kind === 'bytes' || !parsed.mediaType.includes('json') || parsed.parameters.has('charset')) {
    return current!;
  }
  const parameters = [...parsed.parameters].map(([name, value]) => `${name}="${value}"`);
  return [parsed.mediaType, ...parameters, 'charset=utf-8'].join('; ');
}

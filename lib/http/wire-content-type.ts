/**
 * The `Content-Type` each adapter really writes for a body, worked out before it is written so
 * the stored answer (and so every replay) carries the first answer's header byte for byte. The
 * adapters rewrite the header on the way out, each its own way: Express 5 puts
 * `charset=utf-8` on every text body (lower-casing and reordering the header), Fastify 5 only
 * on JSON types and leaves a `text/csv` string alone.
 */

/** Characters of an RFC 9110 token. */
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const TYPE = new RegExp(`^${TOKEN}/${TOKEN}$`);
const TOKEN_ONLY = new RegExp(`^${TOKEN}$`);
/** One `; name=value` parameter, as the `content-type` package (Express's) reads it. */
const EXPRESS_PARAM = new RegExp(
  `; *(${TOKEN}) *= *("(?:[\\u000b\\u0020\\u0021\\u0023-\\u005b\\u005d-\\u007e\\u0080-\\u00ff]|\\\\[\\u000b\\u0020-\\u00ff])*"|${TOKEN}) *`,
  'g',
);
/** One parameter as Fastify's `ContentType` reads it. */
const FASTIFY_PARAM =
  /(?:^|;)\s*([\w!#$%&'*+.^`|~-]+)=("(?:[\t\u0020\u0021\u0023-\u005b\u005d-\u007e\u0080-\u00ff]|\\[\t\u0020-\u00ff])*"|[\w!#$%&'*+.^`|~-]+)/gu;
const FASTIFY_TYPE_NAME = /^[\w!#$%&'*+.^`|~-]+$/;
const FASTIFY_SUBTYPE_NAME = /^[\w!#$%&'*+.^`|~-]+\s*$/;

function unquote(value: string, escapes: RegExp): string {
  return value.charCodeAt(0) === 0x22 ? value.slice(1, -1).replace(escapes, '$1') : value;
}

/**
 * What Express 5's `res.send` writes for a string body (`res.json` sends one too): the route's
 * content type, else `text/html`, parsed and written back with `charset=utf-8` (Express's
 * `setCharset`: type lower-cased, parameters sorted, any other charset replaced).
 *
 * @param current - the content type set on the response, if any
 * @returns the header Express will write; `current` as it is when Express cannot parse it
 *   (its `send` then throws, and nothing is written)
 */
export function expressTextContentType(current: string | undefined): string {
  const header = current ?? 'text/html; charset=utf-8';
  const semicolon = header.indexOf(';');
  const type = (semicolon === -1 ? header : header.slice(0, semicolon)).trim();
  if (!TYPE.test(type)) return header;
  const parameters = new Map<string, string>();
  if (semicolon !== -1) {
    let at = semicolon;
    EXPRESS_PARAM.lastIndex = at;
    for (let match = EXPRESS_PARAM.exec(header); match; match = EXPRESS_PARAM.exec(header)) {
      if (match.index !== at) return header;
      at += match[0].length;
      // eslint-disable-next-line no-control-regex
      parameters.set(match[1].toLowerCase(), unquote(match[2], /\\([\u000b\u0020-\u00ff])/g));
    }
    if (at !== header.length) return header;
  }
  parameters.set('charset', 'utf-8');
  const formatted = [...parameters.keys()].sort().map((name) => {
    const value = parameters.get(name)!;
    const quoted = TOKEN_ONLY.test(value) ? value : `"${value.replace(/([\\"])/g, '\\$1')}"`;
    return `; ${name}=${quoted}`;
  });
  return type.toLowerCase() + formatted.join('');
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
  const written = parameters.length
    ? `${parsed.mediaType}; ${parameters.join('; ')}`
    : parsed.mediaType;
  return `${written}; charset=utf-8`;
}

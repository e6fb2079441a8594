import type { LoggerService } from '@nestjs/common';

/** Media types warned about, at most: a client can send a new one with every request. */
export const MAX_UNPARSED_TYPES_LOGGED = 16;
/** Longest media type kept and logged; a longer one is cut (a header can be kilobytes). */
const MAX_TYPE_LENGTH = 100;

/**
 * Warns once per media type that a request body went unparsed (so was refused with 415), with
 * bounded memory and log volume whatever clients send: the type is reduced to its media type
 * (no parameters, lower case, cut at 100 characters), at most `MAX_UNPARSED_TYPES_LOGGED` are
 * remembered and logged, then one line says further types are not logged, and nothing more.
 * The raw header is never kept.
 */
export class UnparsedContentTypeWarnings {
  private readonly logged = new Set<string>();
  private full = false;

  /** @param logger - where the warnings go */
  constructor(private readonly logger: Pick<LoggerService, 'warn'>) {}

  /**
   * Warns about `contentType` unless its media type was warned about already or the limit was
   * reached.
   *
   * @param contentType - the request's `Content-Type` header, as it came
   * @param route - the route, for the message (`POST /payments`)
   */
  warn(contentType: unknown, route: string): void {
    const type = mediaTypeOf(contentType);
    if (this.logged.has(type) || this.full) return;
    if (this.logged.size >= MAX_UNPARSED_TYPES_LOGGED) {
      this.full = true;
      this.logger.warn(
        `${route}: more request bodies of unparsed content types were refused (415); ` +
          `further types are not logged (${MAX_UNPARSED_TYPES_LOGGED} were).`,
      );
      return;
    }
    this.logged.add(type);
    this.logger.warn(
      `${route}: a "${type}" body was not parsed, so it cannot be fingerprinted and the ` +
        'request was refused (415). Start Nest with rawBody: true and add a parser for this ' +
        "type (app.useBodyParser('text') or 'raw' on Express), or refuse the type before this " +
        'route.',
    );
  }
}

/** The media type of a `Content-Type` value: no parameters, lower case, at most 100 characters. */
function mediaTypeOf(contentType: unknown): string {
  const value = Array.isArray(contentType) ? contentType[0] : contentType;
  if (typeof value !== 'string') return String(value);
  const type = value.split(';', 1)[0].trim().toLowerCase();
  return type.length > MAX_TYPE_LENGTH ? `${type.slice(0, MAX_TYPE_LENGTH)}…` : type;
}

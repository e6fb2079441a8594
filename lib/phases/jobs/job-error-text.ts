/** The most characters of a failed delivery's error kept in `last_error`. */
export const JOB_ERROR_TEXT_MAX_LENGTH = 2000;

/**
 * A failed delivery's error as text PostgreSQL stores: NUL characters removed (a `text` column
 * refuses them, and the failure would go unrecorded) and the length capped, so a handler's
 * huge error message cannot bloat the jobs table.
 * @param error - what the handler threw (anything)
 */
export function jobErrorText(error: unknown): string {
  let text: string;
  try {
    text = error instanceof Error ? error.message : String(error);
  } catch {
    text = 'a value that cannot be shown as text';
  }
  text = text.replaceAll('\u0000', '');
  if (text.length <= JOB_ERROR_TEXT_MAX_LENGTH) return text;
  let cut = text.slice(0, JOB_ERROR_TEXT_MAX_LENGTH - 1);
  // Never leave half of a surrogate pair at the end.
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/** Column alignment. */
export type Align = 'left' | 'right';

/**
 * Formats rows as a plain-text table with aligned columns and a rule under the header.
 *
 * @param header - column titles
 * @param rows - cells, already formatted as text
 * @param align - per column; text columns left, numbers right (default: first left, rest right)
 */
export function formatTable(header: string[], rows: string[][], align?: Align[]): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const alignOf = (column: number): Align => align?.[column] ?? (column === 0 ? 'left' : 'right');
  const line = (cells: string[]) =>
    cells
      .map((cell, column) =>
        alignOf(column) === 'left'
          ? (cell ?? '').padEnd(widths[column])
          : (cell ?? '').padStart(widths[column]),
      )
      .join('  ')
      .trimEnd();
  return [
    line(header),
    widths.map((width) => '-'.repeat(width)).join('  '),
    ...rows.map(line),
  ].join('\n');
}

import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { format, resolveConfig } from 'prettier';
import type { ChaosRunResult, ScenarioResult } from './chaos-result';

/** Where the last run's result is written. */
/** Where a run's results go: `latest.json`, or `quick.json` for a `--quick` run. */
export function resultsFile(mode: ChaosRunResult['mode']): string {
  return resolve(__dirname, mode === 'quick' ? 'results/quick.json' : 'results/latest.json');
}

const COLUMNS: { title: string; value: (result: ScenarioResult) => string; left?: boolean }[] = [
  { title: 'scenario', value: (r) => r.scenario, left: true },
  { title: 'requests', value: (r) => String(r.requests) },
  { title: 'kills/outages', value: (r) => r.disruptions },
  {
    title: 'statuses',
    value: (r) =>
      Object.entries(r.statuses)
        .map(([label, count]) => `${label}:${count}`)
        .join(' '),
    left: true,
  },
  { title: 'keys', value: (r) => String(r.keys) },
  { title: 'executions', value: (r) => String(r.executions) },
  { title: 'provider calls', value: (r) => String(r.providerCalls) },
  { title: 'payments', value: (r) => String(r.payments) },
  { title: 'charges', value: (r) => String(r.charges) },
  { title: 'receipts', value: (r) => (r.receipts === undefined ? '-' : String(r.receipts)) },
  { title: 'dup', value: (r) => String(r.duplicates) },
  { title: 'lost', value: (r) => String(r.lost) },
  { title: 'stuck', value: (r) => String(r.stuck) },
  { title: 'leaks', value: (r) => String(r.leaks) },
  { title: 'other', value: (r) => String(r.failures) },
  { title: 'verdict', value: (r) => r.verdict, left: true },
  { title: 'time', value: (r) => `${(r.durationMs / 1000).toFixed(1)}s` },
];

/**
 * Renders one row per scenario: what was thrown, what was found, and the verdict.
 * @returns the table as text, ready to print
 */
export function formatTable(results: readonly ScenarioResult[]): string {
  const cells = results.map((result) => COLUMNS.map((column) => column.value(result)));
  const widths = COLUMNS.map((column, index) =>
    Math.max(column.title.length, ...cells.map((row) => row[index].length)),
  );
  const line = (values: string[]) =>
    `| ${values
      .map((value, index) =>
        COLUMNS[index].left ? value.padEnd(widths[index]) : value.padStart(widths[index]),
      )
      .join(' | ')} |`;
  const rule = `|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`;
  return [line(COLUMNS.map((column) => column.title)), rule, ...cells.map(line)].join('\n');
}

/**
 * Lists every scenario's violations under the table.
 * @returns an empty string when there are none
 */
export function formatViolations(results: readonly ScenarioResult[]): string {
  return results
    .filter((result) => result.violations.length > 0)
    .map((result) =>
      [`${result.scenario}:`, ...result.violations.map((v) => `  - ${v}`)].join('\n'),
    )
    .join('\n');
}

/**
 * Writes the run as JSON to `resultsFile(run.mode)`, formatted with the project's
 * Prettier settings so the format check stays green.
 */
export async function writeResults(run: ChaosRunResult): Promise<string> {
  const file = resultsFile(run.mode);
  const options = (await resolveConfig(file)) ?? {};
  const text = await format(JSON.stringify(run), { ...options, parser: 'json' });
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, text);
  return file;
}

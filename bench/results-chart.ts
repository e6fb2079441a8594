/**
 * The chart of BENCHMARKS.md: the library's throughput against the floors and the peers, one row
 * per target, the median of the per-round ratios with the range of the rounds and the target's
 * line. A plain SVG written by hand, so the page shows it on GitHub and nothing is installed.
 *
 * `npm run bench` calls {@link writeResultsChart} at the end of a full run. By hand:
 *
 *     npx ts-node --transpile-only bench/results-chart.ts [input.json] [--out bench/chart/throughput-ratios.svg]
 *
 * The input is the runner's results file (`bench/results/latest.json`, the default) or a file of
 * {@link ChartFigures} already worked out (`bench/chart/run-817825c.json`: the figures of a run
 * whose results file is not in the repository, copied from BENCHMARKS.md).
 */
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { BenchOptions } from './runner/bench-options';
import { BENCH_PHASES } from './runner/bench-options';
import type { BenchResults } from './runner/bench-results';
import { median } from './runner/latency-stats';
import type { ThroughputRow } from './runner/phases/throughput.phase';

/** Where the chart goes, and where BENCHMARKS.md shows it from. */
export const CHART_FILE = 'bench/chart/throughput-ratios.svg';

/** One adapter's figure for one target: the median, and each round's ratio when recorded. */
export interface ChartFigure {
  median: number;
  rounds?: number[];
  /** The contract floor's ratio against the same reference, in the same rounds. */
  contractFloor?: number;
}

/** One target: what is compared with what, its line, and each adapter's figure. */
export interface ChartRow {
  label: string;
  target: number;
  express?: ChartFigure;
  fastify?: ChartFigure;
}

/** Everything the chart shows. */
export interface ChartFigures {
  /** The run, as the chart's title says it. */
  run: string;
  rows: ChartRow[];
}

/** A throughput row of one adapter by its case id. */
type Rows = (id: string) => ThroughputRow | undefined;
/** One adapter's figure for a target, from its throughput rows. */
type Pick = (row: Rows) => ChartFigure | undefined;

/** Per-round ratios `a / b` of two rows measured in the same rounds (as the targets take them). */
function ratio(
  a: ThroughputRow | undefined,
  b: ThroughputRow | undefined,
): ChartFigure | undefined {
  if (!a || !b || a.roundsRps.length !== b.roundsRps.length) return undefined;
  const rounds = a.roundsRps.map((rps, i) => rps / b.roundsRps[i]);
  return { median: median(rounds), rounds };
}

/** `first / reference`, with the contract floor's ratio to the same reference beside it. */
const withContractFloor =
  (first: string, reference: string, contractFloor: string): Pick =>
  (row) => {
    const own = ratio(row(first), row(reference));
    return own && { ...own, contractFloor: ratio(row(contractFloor), row(reference))?.median };
  };

/** The throughput targets the chart shows: label, line, figure. */
const THROUGHPUT_ROWS: [string, number, Pick][] = [
  [
    'first execution / floor from an interceptor',
    0.95,
    withContractFloor('first', 'floor-interceptor', 'floor-contract'),
  ],
  ['first execution / contract floor', 0.95, (row) => ratio(row('first'), row('floor-contract'))],
  [
    'transactional / its floor from an interceptor',
    0.95,
    withContractFloor('first-tx', 'floor-tx-interceptor', 'floor-contract-tx'),
  ],
  [
    'transactional / transactional contract floor',
    0.95,
    (row) => ratio(row('first-tx'), row('floor-contract-tx')),
  ],
  ['replay / Redis peer replay', 1, (row) => ratio(row('replay'), row('peer-replay'))],
  [
    'first execution / durable peer',
    1.5,
    withContractFloor('first', 'durable-first', 'floor-contract'),
  ],
];

/** The chart's figures from the runner's results file. */
export function figuresFromResults(results: BenchResults): ChartFigures {
  const adapter = (name: string) => results.adapters.find((a) => a.adapter === name);
  const throughput = (name: string, pick: Pick) => {
    const rows = adapter(name)?.throughput ?? [];
    return pick((id) => rows.find((row) => row.id === id));
  };
  // The encryption phase's sealed 1 KB replay against its clear twin, read from PostgreSQL.
  const sealedReplay = (name: string): ChartFigure | undefined => {
    const sealed = adapter(name)?.encryption?.find((row) => row.id === 'replay-1024-sealed');
    return sealed && { median: sealed.ratioToClear, rounds: sealed.roundsRatio };
  };
  const { machine } = results;
  const started = results.startedAt.slice(0, 16).replace('T', ' ');
  return {
    run:
      `${machine.commit ?? 'this checkout'}, ${started} UTC, ${results.options.rounds} rounds, ` +
      `${machine.cpuModel} × ${machine.cores}, Node ${machine.node}`,
    rows: [
      ...THROUGHPUT_ROWS.map(([label, target, pick]) => ({
        label,
        target,
        express: throughput('express', pick),
        fastify: throughput('fastify', pick),
      })),
      {
        label: 'sealed 1 KB replay / clear (from PostgreSQL)',
        target: 0.95,
        express: sealedReplay('express'),
        fastify: sealedReplay('fastify'),
      },
    ],
  };
}

/** `&`, `<` and `>` as SVG text needs them. */
const text = (value: string) =>
  value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

const COLORS = { express: '#1f6feb', fastify: '#d1242f' } as const;
const LABEL_WIDTH = 330;
const PLOT_WIDTH = 420;
const ROW_HEIGHT = 44;
const TOP = 64;

/** The chart as SVG text. */
export function renderChart(figures: ChartFigures): string {
  const values = figures.rows.flatMap((row) => [
    row.target,
    ...(['express', 'fastify'] as const).flatMap((adapter) => {
      const figure = row[adapter];
      if (!figure) return [];
      const own = [figure.median, ...(figure.rounds ?? [])];
      return figure.contractFloor === undefined ? own : [...own, figure.contractFloor];
    }),
  ]);
  const low = Math.min(0.5, Math.floor(Math.min(...values) * 10) / 10);
  const high = Math.max(1.6, Math.ceil(Math.max(...values) * 10) / 10 + 0.1);
  const x = (value: number) =>
    Math.round((LABEL_WIDTH + ((value - low) / (high - low)) * PLOT_WIDTH) * 10) / 10;
  const height = TOP + figures.rows.length * ROW_HEIGHT + 56;
  const width = LABEL_WIDTH + PLOT_WIDTH + 56;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="-apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="12" y="20" font-size="14" font-weight="bold">Throughput against the floors and the peers (median of the rounds; bar: the rounds' range)</text>`,
    `<text x="12" y="38" fill="#57606a">${text(figures.run)}</text>`,
  ];
  // Legend.
  out.push(
    `<circle cx="${LABEL_WIDTH}" cy="52" r="4" fill="${COLORS.express}"/><text x="${LABEL_WIDTH + 8}" y="56">Express</text>`,
    `<circle cx="${LABEL_WIDTH + 70}" cy="52" r="4" fill="${COLORS.fastify}"/><text x="${LABEL_WIDTH + 78}" y="56">Fastify</text>`,
    `<path d="M ${LABEL_WIDTH + 140} 47 l 5 5 l -5 5 l -5 -5 z" fill="none" stroke="#57606a"/><text x="${LABEL_WIDTH + 150}" y="56">contract floor</text>`,
    `<line x1="${LABEL_WIDTH + 250}" y1="46" x2="${LABEL_WIDTH + 250}" y2="58" stroke="#1a7f37" stroke-width="2" stroke-dasharray="3 2"/><text x="${LABEL_WIDTH + 256}" y="56">target</text>`,
  );
  const bottom = TOP + figures.rows.length * ROW_HEIGHT;
  for (let tick = Math.ceil(low * 10); tick <= Math.floor(high * 10); tick++) {
    const value = tick / 10;
    const major = tick % 5 === 0;
    out.push(
      `<line x1="${x(value)}" y1="${TOP - 4}" x2="${x(value)}" y2="${bottom}" stroke="${major ? '#afb8c1' : '#eaeef2'}"/>`,
    );
    if (tick % 2 === 0) {
      out.push(
        `<text x="${x(value)}" y="${bottom + 16}" text-anchor="middle" fill="#57606a">${value.toFixed(1)}×</text>`,
      );
    }
  }
  figures.rows.forEach((row, index) => {
    const top = TOP + index * ROW_HEIGHT;
    out.push(
      `<text x="12" y="${top + ROW_HEIGHT / 2 + 4}">${text(row.label)}</text>`,
      `<line x1="${x(row.target)}" y1="${top + 4}" x2="${x(row.target)}" y2="${top + ROW_HEIGHT - 4}" stroke="#1a7f37" stroke-width="2" stroke-dasharray="3 2"/>`,
    );
    (['express', 'fastify'] as const).forEach((adapter, line) => {
      const figure = row[adapter];
      if (!figure) return;
      const y = top + 14 + line * 16;
      const color = COLORS[adapter];
      if (figure.rounds?.length) {
        const [min, max] = [Math.min(...figure.rounds), Math.max(...figure.rounds)];
        out.push(
          `<line x1="${x(min)}" y1="${y}" x2="${x(max)}" y2="${y}" stroke="${color}" stroke-width="3" stroke-opacity="0.35" stroke-linecap="round"/>`,
        );
      }
      if (figure.contractFloor !== undefined) {
        const cx = x(figure.contractFloor);
        out.push(
          `<path d="M ${cx} ${y - 5} l 5 5 l -5 5 l -5 -5 z" fill="none" stroke="${color}"/>`,
        );
      }
      out.push(
        `<circle cx="${x(figure.median)}" cy="${y}" r="4" fill="${color}"/>`,
        `<text x="${width - 6}" y="${y + 4}" text-anchor="end" font-size="11" fill="${color}">${figure.median.toFixed(2)}</text>`,
      );
    });
  });
  out.push(
    `<text x="12" y="${bottom + 40}" fill="#57606a">Each ratio: req/s of the first route over the second's, in the same round on the same server; right of the target is better.</text>`,
    '</svg>',
  );
  return `${out.join('\n')}\n`;
}

/** Whether a run measured everything the chart shows, the way a full run does. */
export function isFullRun(options: BenchOptions): boolean {
  return (
    !options.quick &&
    !options.baseline &&
    !options.plain &&
    !options.instructions &&
    options.cases === undefined &&
    BENCH_PHASES.every((phase) => options.phases.includes(phase))
  );
}

/** Writes the chart of `input` (results file or figures) to `output`; returns its path. */
export function writeResultsChart(input: BenchResults | ChartFigures, output: string): string {
  const figures = 'schemaVersion' in input ? figuresFromResults(input) : input;
  const file = resolve(__dirname, '..', output);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, renderChart(figures));
  return file;
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const at = args.indexOf('--out');
  const output = at >= 0 ? args.splice(at, 2)[1] : CHART_FILE;
  const input = resolve(args[0] ?? 'bench/results/latest.json');
  const file = writeResultsChart(JSON.parse(readFileSync(input, 'utf8')), output);
  process.stdout.write(`chart: ${file}\n`);
}

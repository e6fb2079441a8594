/**
 * `npm run history`: records every operation of a workload (payments, staged jobs, webhooks
 * delivered two or three times), through an Express and a
 * Fastify instance (child processes) sharing one database, while faults fire: a lossy proxy before
 * each instance, SIGKILL and SIGSTOP of a key's owner mid-handler, cut database connections, and
 * failovers (a primary and a streaming replica of the run's own, behind an endpoint that moves).
 * Then it checks the whole history against the promise with `checkHistory`. With synchronous replication (the default) any violation fails
 * the run; `--async` reports what asynchronous replication loses (expected, exit 0 unless
 * `--strict`). `--quick`: one round, one failover, about three minutes on a loaded machine.
 */
import { parseArgs } from 'node:util';
import { killAllApps } from '../app-cluster';
import { runInterruptCleanups } from '../emergency-cleanup';
import { checkHistory } from './check-history';
import { LEASE_SECONDS, Ledger } from './history-instances';
import { countFaults, countStatuses, formatSummary } from './history-report';
import { runRound } from './history-round';
import { newCounts } from './history-workload';

const USAGE = `npm run history -- [--quick] [--async [--strict]] [--rounds N] [--failovers N]
  --quick        one round of 40 s with one failover (CI)
  --async        asynchronous replication: report what is lost, exit 0 unless --strict
  --strict       with --async, exit non-zero on a violation too
  --rounds N     rounds, each a fresh primary and replica (full: 3)
  --failovers N  failovers per round, a new standby cloned between two (full: 3)`;

const startedAt = Date.now();
const log = (line: string) =>
  process.stderr.write(`[history +${((Date.now() - startedAt) / 1000).toFixed(1)}s] ${line}\n`);

function parseOptions() {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      async: { type: 'boolean', default: false },
      strict: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      failovers: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  return {
    replication: values.async ? ('async' as const) : ('sync' as const),
    strict: values.strict || !values.async,
    rounds: Number(values.rounds ?? (values.quick ? 1 : 3)),
    failovers: Number(values.failovers ?? (values.quick ? 1 : 3)),
    workloadMs: values.quick ? 40_000 : 180_000,
    workers: values.quick ? 6 : 10,
    proxyRate: 0.08,
  };
}

async function main(): Promise<number> {
  const options = parseOptions();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: removing the clusters`);
      void runInterruptCleanups().finally(() => {
        killAllApps();
        process.exit(130);
      });
    });
  }
  const ledger = new Ledger();
  const counts = newCounts();
  for (let round = 1; round <= options.rounds; round++) {
    await runRound(ledger, counts, { ...options, round, log });
  }
  // Lease plus the time a client's retry takes to come round: a freed key is taken within it.
  const settleBoundMs = LEASE_SECONDS * 1000 + 8_000;
  const violations = checkHistory(ledger.history.events, { settleBoundMs });
  const summary = {
    replication: options.replication,
    counts,
    faults: countFaults(ledger.history.events),
    statuses: countStatuses(ledger.history.events),
    violations,
    history: ledger.history.events,
    notStored: new Set(
      ledger.history.events.flatMap((event) => (event.type === 'not-stored' ? [event.key] : [])),
    ),
    durationMs: Date.now() - startedAt,
  };
  // Every violation's evidence when it fails the run; a sample of each rule when it is expected.
  process.stdout.write(`\n${formatSummary(summary, options.strict ? Infinity : 3)}\n`);
  if (violations.length && !options.strict)
    process.stdout.write('\nexpected with asynchronous replication: exit 0 (--strict fails)\n');
  return violations.length && options.strict ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  async (error) => {
    process.stderr.write(`history run failed: ${(error as Error)?.stack ?? error}\n`);
    await runInterruptCleanups();
    killAllApps();
    process.exit(2);
  },
);

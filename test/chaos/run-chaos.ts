/**
 * `npm run chaos`: throws storms, database outages, cross-tenant replays and a four-instance
 * scale-out under `kill -9` at the sample payments app running as real child processes on the
 * local PostgreSQL, and kills it at every phase boundary of `POST /payments`, then counts executions, payments, provider charges
 * and receipts in the database and checks them against the responses the clients got. Prints one
 * row per scenario, writes `results/latest.json` (`quick.json` for `--quick`), and exits non-zero
 * when any invariant is violated. `--help` for the flags.
 */
import { killAllApps } from './app-cluster';
import { createChaosDatabase } from './chaos-database';
import { CHAOS_USAGE, parseChaosOptions } from './chaos-options';
import type { ChaosOptions } from './chaos-options';
import type { ChaosRunResult, ScenarioName, ScenarioResult } from './chaos-result';
import { formatTable, formatViolations, writeResults } from './chaos-report';
import { runInterruptCleanups } from './emergency-cleanup';
import { createSchemaTemplate } from './schema-template';
import type { Scenario } from './scenario-support';
import { runOutage } from './scenarios/outage.scenario';
import { runPhases } from './scenarios/phases.scenario';
import { runScaleOut } from './scenarios/scale-out.scenario';
import { runStorm } from './scenarios/storm.scenario';
import { runTenancy } from './scenarios/tenancy.scenario';

const SCENARIOS: Record<ScenarioName, Scenario> = {
  storm: runStorm,
  outage: runOutage,
  tenancy: runTenancy,
  phases: runPhases,
  scaleout: runScaleOut,
};

const runStartedAt = Date.now();
const log = (line: string) =>
  process.stderr.write(`[chaos +${((Date.now() - runStartedAt) / 1000).toFixed(1)}s] ${line}\n`);

function crashed(scenario: ScenarioName, startedAt: number, error: unknown): ScenarioResult {
  return {
    scenario,
    requests: 0,
    disruptions: '-',
    statuses: {},
    executions: 0,
    providerCalls: 0,
    payments: 0,
    charges: 0,
    keys: 0,
    duplicates: 0,
    lost: 0,
    stuck: 0,
    leaks: 0,
    failures: 1,
    durationMs: Date.now() - startedAt,
    verdict: 'FAIL',
    violations: [`failure: the scenario itself failed: ${(error as Error)?.stack ?? error}`],
    details: {},
  };
}

async function runScenarios(options: ChaosOptions): Promise<ChaosRunResult> {
  const startedAt = new Date();
  const stamp = startedAt.toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').toLowerCase();
  const database = `chaos_${stamp}`;
  const tag = Date.now().toString(36);
  const results: ScenarioResult[] = [];
  log(
    `${options.quick ? 'quick' : 'full'} run ${database} on ${options.adapters.join(' + ')}: ` +
      options.scenarios.join(', '),
  );
  const template = await createSchemaTemplate(options.serverUrl, `${database}_template`);
  try {
    for (const name of options.scenarios) {
      const scenarioStartedAt = Date.now();
      const db = await createChaosDatabase(options.serverUrl, `${database}_${name}`, template.name);
      try {
        results.push(await SCENARIOS[name]({ options, db, tag, log }));
      } catch (error) {
        results.push(crashed(name, scenarioStartedAt, error));
      } finally {
        killAllApps();
        await db.close(options.keepDatabases);
      }
      const last = results[results.length - 1];
      log(`${name}: ${last.verdict} in ${(last.durationMs / 1000).toFixed(1)} s`);
    }
  } finally {
    await template.close(false);
  }
  return {
    startedAt: startedAt.toISOString(),
    durationMs: Date.now() - startedAt.getTime(),
    mode: options.quick ? 'quick' : 'full',
    adapters: [...options.adapters],
    database,
    scenarios: results,
    verdict: results.every((result) => result.verdict === 'PASS') ? 'PASS' : 'FAIL',
  };
}

async function main(): Promise<void> {
  let options: ReturnType<typeof parseChaosOptions>;
  try {
    options = parseChaosOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exitCode = 2;
    return;
  }
  if (options === 'help') {
    process.stdout.write(`${CHAOS_USAGE}\n`);
    return;
  }
  process.on('exit', killAllApps);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: cleaning up`);
      killAllApps();
      void runInterruptCleanups().finally(() => process.exit(130));
    });
  }
  const run = await runScenarios(options);
  process.stdout.write(`\n${formatTable(run.scenarios)}\n`);
  const violations = formatViolations(run.scenarios);
  if (violations) process.stdout.write(`\nViolations\n${violations}\n`);
  const file = await writeResults(run);
  process.stdout.write(
    `\n${run.verdict} in ${(run.durationMs / 1000).toFixed(1)} s; results in ${file}\n`,
  );
  if (run.verdict !== 'PASS') process.exitCode = 1;
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error)?.stack ?? error}\n`);
  killAllApps();
  process.exitCode = 1;
});

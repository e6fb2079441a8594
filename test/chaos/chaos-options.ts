import { parseArgs } from 'node:util';
import type { SampleHttpAdapter } from '../../sample-app/config/sample-app.config';
import { SCENARIO_NAMES } from './chaos-result';
import type { ScenarioName } from './chaos-result';

/** Sizes of one run; `--quick` picks the small ones (CI), the default the full ones. */
export interface ChaosSizes {
  stormKeys: number;
  stormRequestsPerKey: number;
  /** Keys whose bursts run at the same time. */
  stormParallelKeys: number;
  /** Concurrent clients, each sending key after key, during the outage scenario. */
  outageClients: number;
  /** How long the database stays unreachable. */
  outageSeconds: number;
  tenancyKeys: number;
  /** Rounds of the phases scenario: each crashes one process at every hook of `POST /payments`. */
  phasesRounds: number;
  /** Keys per hook whose client sends once and gives up: only the completer can finish them. */
  phasesNoRetryKeys: number;
  /** Keys per hook whose client retries (on a survivor) until final. */
  phasesRetryKeys: number;
  /** Rounds of the scale-out scenario (four instances, two behind PgBouncer): one kill each. */
  scaleOutRounds: number;
  /** Keys per scale-out round, each sent by four clients at once. */
  scaleOutKeysPerRound: number;
}

/** Everything `npm run chaos` was asked to do. */
export interface ChaosOptions {
  quick: boolean;
  scenarios: ScenarioName[];
  /** Adapter of each of the two app instances. */
  adapters: [SampleHttpAdapter, SampleHttpAdapter];
  /** Keep the scenario databases for inspection instead of dropping them. */
  keepDatabases: boolean;
  /** Lease of in-flight requests in the apps (`IDEMPOTENCY_LOCK_TIMEOUT_SECONDS`). */
  leaseSeconds: number;
  /** PostgreSQL server URL used to create the run's databases. */
  serverUrl: string;
  sizes: ChaosSizes;
}

const FULL: ChaosSizes = {
  stormKeys: 100,
  stormRequestsPerKey: 50,
  stormParallelKeys: 5,
  outageClients: 16,
  outageSeconds: 4,
  tenancyKeys: 20,
  phasesRounds: 5,
  phasesNoRetryKeys: 2,
  phasesRetryKeys: 3,
  scaleOutRounds: 8,
  scaleOutKeysPerRound: 20,
};

const QUICK: ChaosSizes = {
  stormKeys: 20,
  stormRequestsPerKey: 20,
  stormParallelKeys: 5,
  outageClients: 8,
  outageSeconds: 2,
  tenancyKeys: 6,
  phasesRounds: 1,
  phasesNoRetryKeys: 2,
  phasesRetryKeys: 2,
  scaleOutRounds: 4,
  scaleOutKeysPerRound: 6,
};

/** Usage text for `--help` and argument errors. */
export const CHAOS_USAGE = `Usage: npm run chaos -- [--quick] [--scenarios storm,outage,tenancy,phases,scaleout]
                       [--adapter express|fastify] [--keep-db]

  --quick        small counts; the outage terminates the app's connections instead of
                 stopping PostgreSQL (safe for CI, about 70 s)
  --scenarios    comma-separated subset to run (default: all); only \`outage\` without
                 --quick stops the PostgreSQL server
  --adapter      run both app instances on this adapter (default: express + fastify)
  --keep-db      keep the scenario databases for inspection
Environment: CHAOS_DATABASE_URL or DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)`;

/**
 * Parses the command line of `npm run chaos`.
 *
 * @param argv - arguments after the script name
 * @param env - usually `process.env`
 * @returns the options, or `'help'` when `--help` was given
 * @throws Error with the usage text on an unknown flag or value
 */
export function parseChaosOptions(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): ChaosOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      scenarios: { type: 'string' },
      adapter: { type: 'string' },
      'keep-db': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return 'help';

  const scenarios = (values.scenarios ?? SCENARIO_NAMES.join(','))
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  for (const name of scenarios) {
    if (!(SCENARIO_NAMES as readonly string[]).includes(name)) {
      throw new Error(`Unknown scenario "${name}".\n${CHAOS_USAGE}`);
    }
  }
  const adapter = values.adapter;
  if (adapter !== undefined && adapter !== 'express' && adapter !== 'fastify') {
    throw new Error(`Unknown adapter "${adapter}".\n${CHAOS_USAGE}`);
  }
  return {
    quick: values.quick,
    scenarios: SCENARIO_NAMES.filter((name) => scenarios.includes(name)),
    adapters: adapter ? [adapter, adapter] : ['express', 'fastify'],
    keepDatabases: values['keep-db'],
    leaseSeconds: 2,
    serverUrl:
      env.CHAOS_DATABASE_URL ?? env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    sizes: values.quick ? QUICK : FULL,
  };
}

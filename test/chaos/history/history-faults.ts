/**
 * The faults of a history round, injected one at a time while the workload runs, each recorded in
 * the history as it fires: SIGKILL of the instance running a handler (restarted at once), SIGSTOP
 * of one for longer than the lease (then SIGCONT), database connections cut on the primary
 * (`pg_terminate_backend`), and failovers (the standby stalls, the primary crashes, the standby is
 * promoted and takes the endpoint), with a new standby cloned between two failovers.
 */
import type { MovingEndpoint } from '../failover/moving-endpoint';
import { query } from '../failover/postgres-pair';
import type { PostgresPair } from '../failover/postgres-pair';
import { LEASE_SECONDS } from './history-instances';
import type { HistoryInstances, Ledger } from './history-instances';

export interface FaultContext {
  ledger: Ledger;
  instances: HistoryInstances;
  pair: PostgresPair;
  endpoint: MovingEndpoint;
  log: (line: string) => void;
  /** Set by the interrupt handler: no new fault starts. */
  interrupted: () => boolean;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How long the standby stays stopped before a failover: commits made then wait for it. */
export const STALL_MS = 1_500;

/**
 * A live slot whose instance runs a handler now (polled for up to 3 s), never the last live one:
 * the fault then lands mid-handler on the key's owner, and a survivor can take the key over. Of
 * several, the one hit least so far (`hits`, by slot), so both adapters take their share.
 */
async function findOwner(instances: HistoryInstances, hits: number[]): Promise<number | undefined> {
  for (const endsAt = Date.now() + 3_000; Date.now() < endsAt;) {
    const live = instances.cluster.liveSlots();
    if (live.length < 2) return undefined;
    const owners = live.filter((slot) => instances.runningOn(slot).length > 0);
    if (owners.length) {
      const owner = owners.sort((a, b) => (hits[a] ?? 0) - (hits[b] ?? 0))[0];
      hits[owner] = (hits[owner] ?? 0) + 1;
      return owner;
    }
    await sleep(10);
  }
  return undefined;
}

/** SIGKILL of a key's owner mid-handler; it restarts in the background. False if none was found. */
async function killOwner(
  ctx: FaultContext,
  hits: number[],
  restarts: Promise<void>[],
): Promise<boolean> {
  const slot = await findOwner(ctx.instances, hits);
  if (slot === undefined) return false;
  const keys = ctx.instances.runningOn(slot).join(' ');
  const detail = `${ctx.instances.instance(slot)} mid-handler of ${keys}`;
  ctx.ledger.history.fault('sigkill', detail);
  ctx.log(`sigkill: ${detail}`);
  await ctx.instances.kill(slot);
  const restart = ctx.instances.restart(slot);
  restart.catch(() => undefined); // awaited at the end of the faults; not unhandled meanwhile
  restarts.push(restart);
  return true;
}

/** SIGSTOP of a key's owner mid-handler for longer than the lease, then SIGCONT. */
async function pauseOwner(ctx: FaultContext, hits: number[]): Promise<boolean> {
  const slot = await findOwner(ctx.instances, hits);
  if (slot === undefined) return false;
  const ms = Math.round(LEASE_SECONDS * 1000 * (1.5 + Math.random()));
  const keys = ctx.instances.runningOn(slot).join(' ');
  const detail = `${ctx.instances.instance(slot)} for ${ms} ms, mid-handler of ${keys}`;
  ctx.ledger.history.fault('sigstop', detail);
  ctx.log(`sigstop: ${detail}`);
  ctx.instances.cluster.pause(slot);
  await sleep(ms);
  ctx.instances.cluster.resume(slot);
  return true;
}

/** Terminates about half the apps' connections on the node that takes writes. */
async function cutConnections(ctx: FaultContext): Promise<void> {
  const [{ n }] = await query<{ n: number }>(
    ctx.pair.url(ctx.pair.current),
    `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
     WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND random() < 0.5`,
  );
  ctx.ledger.history.fault('db cut', `${n} connections terminated`);
}

/** The standby stalls, the primary crashes, the standby is promoted and takes the endpoint. */
async function failOver(ctx: FaultContext): Promise<void> {
  ctx.ledger.history.fault('standby stall', `${STALL_MS} ms`);
  await ctx.pair.stop('replica', 'immediate');
  await sleep(STALL_MS);
  ctx.ledger.history.fault('failover', 'the primary crashes, the standby is promoted');
  await ctx.pair.failOver();
  ctx.endpoint.moveTo(ctx.pair.replicaPort);
  ctx.log('failover: the endpoint moved to the promoted standby');
}

/**
 * Injects faults until `untilMs` (epoch ms): `failovers` failovers evenly spread (a new standby
 * cloned after each but the last), and between them, every 2–5 s, the next of SIGSTOP, a cut,
 * SIGKILL, a cut (a cut instead while no owner can be hit). Resolves once every restarted instance is up.
 */
export async function injectFaults(
  ctx: FaultContext,
  options: { untilMs: number; failovers: number },
): Promise<void> {
  const startedAt = Date.now();
  const span = options.untilMs - startedAt;
  const failoverAt = Array.from(
    { length: options.failovers },
    (_, n) => startedAt + (span * (n + 1)) / (options.failovers + 1),
  );
  const rotation = ['sigstop', 'cut', 'sigkill', 'cut'];
  const restarts: Promise<void>[] = [];
  const [killed, paused]: number[][] = [[], []];
  for (let next = 0; Date.now() < options.untilMs - 2_000 && !ctx.interrupted();) {
    if (failoverAt.length && Date.now() >= failoverAt[0] - STALL_MS) {
      failoverAt.shift();
      await failOver(ctx);
      if (failoverAt.length === 0) continue;
      await ctx.pair.rebuildStandby();
      ctx.log('a new standby was cloned from the promoted primary');
      continue;
    }
    const gap = 2_000 + Math.random() * 3_000;
    await sleep(Math.min(gap, Math.max(0, (failoverAt[0] ?? Infinity) - STALL_MS - Date.now())));
    if (failoverAt.length && Date.now() >= failoverAt[0] - STALL_MS) continue;
    // A kill or pause with no owner to hit (one instance still restarting) waits for its turn.
    const kind = rotation[next % rotation.length];
    const done =
      (kind === 'sigkill' && (await killOwner(ctx, killed, restarts))) ||
      (kind === 'sigstop' && (await pauseOwner(ctx, paused)));
    if (done || kind === 'cut') next++;
    if (!done) await cutConnections(ctx).catch((error) => ctx.log(`cut failed: ${error}`));
  }
  await Promise.all(restarts);
}

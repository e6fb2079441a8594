/** The JSON body every bench request sends. */
export const BENCH_BODY = { amount: 100, note: 'bench' };

/** Bench app routes. */
export const ROUTES = {
  plain: '/plain',
  plainTx: '/plain-tx',
  floor: '/floor',
  floorLean: '/floor-lean',
  floorInterceptor: '/floor-interceptor',
  floorTx: '/floor-tx',
  floorTxInside: '/floor-tx-inside',
  floorTxTypeOrm: '/floor-tx-typeorm',
  floorTxInterceptor: '/floor-tx-interceptor',
  floorContract: '/floor-contract',
  floorContractTx: '/floor-contract-tx',
  durable: '/durable',
  stormFloor: '/storm-floor',
  stormFloorInterceptor: '/storm-floor-interceptor',
  idempotent: '/idempotent',
  idempotentTx: '/idempotent-tx',
  peer: '/peer',
  paymentsTx: '/payments-tx',
  paymentsPhased: '/payments-phased',
} as const;

/** How a throughput phase or probe route uses its key. */
export type KeyUse = 'none' | 'fresh' | 'fixed';

/** One measured case: a route and how its key is used. */
export interface BenchCase {
  /** Stable id, used in JSON and for ratios. */
  id:
    | 'plain'
    | 'plain-tx'
    | 'floor'
    | 'floor-lean'
    | 'floor-interceptor'
    | 'floor-tx'
    | 'floor-tx-inside'
    | 'floor-tx-typeorm'
    | 'floor-tx-interceptor'
    | 'floor-contract'
    | 'floor-contract-tx'
    | 'first'
    | 'first-tx'
    | 'replay'
    | 'durable-first'
    | 'durable-replay'
    | 'peer-first'
    | 'peer-replay';
  /** What the table calls it. */
  label: string;
  path: string;
  key: KeyUse;
  /** Needs the peer library (skipped with `--no-peer`). */
  peer: boolean;
}

/** The cases of the throughput table and the unloaded-latency probe, in table order. */
export const BENCH_CASES: readonly BenchCase[] = [
  { id: 'plain', label: 'plain', path: ROUTES.plain, key: 'none', peer: false },
  {
    id: 'plain-tx',
    label: 'plain in a transaction',
    path: ROUTES.plainTx,
    key: 'none',
    peer: false,
  },
  {
    id: 'floor',
    label: 'floor (2 statements by hand)',
    path: ROUTES.floor,
    key: 'fresh',
    peer: false,
  },
  {
    id: 'floor-lean',
    label: 'lean floor',
    path: ROUTES.floorLean,
    key: 'fresh',
    peer: false,
  },
  {
    id: 'floor-interceptor',
    label: 'floor from an interceptor',
    path: ROUTES.floorInterceptor,
    key: 'fresh',
    peer: false,
  },
  {
    id: 'floor-contract',
    label: 'contract floor from an interceptor',
    path: ROUTES.floorContract,
    key: 'fresh',
    peer: false,
  },
  {
    id: 'floor-tx',
    label: 'floor, transactional',
    path: ROUTES.floorTx,
    key: 'fresh',
    peer: false,
  },
  {
    id: 'floor-tx-typeorm',
    label: 'floor, transactional (TypeORM)',
    path: ROUTES.floorTxTypeOrm,
    key: 'fresh',
    peer: false,
  },
  {
    id: 'floor-tx-interceptor',
    label: 'floor, transactional, from an interceptor',
    path: ROUTES.floorTxInterceptor,
    key: 'fresh',
    peer: false,
  },
  {
    id: 'floor-contract-tx',
    label: 'contract floor, transactional',
    path: ROUTES.floorContractTx,
    key: 'fresh',
    peer: false,
  },
  {
    id: 'floor-tx-inside',
    label: 'floor, claim inside the tx',
    path: ROUTES.floorTxInside,
    key: 'fresh',
    peer: false,
  },
  { id: 'first', label: 'first execution', path: ROUTES.idempotent, key: 'fresh', peer: false },
  {
    id: 'first-tx',
    label: 'first execution (tx)',
    path: ROUTES.idempotentTx,
    key: 'fresh',
    peer: false,
  },
  { id: 'replay', label: 'replay', path: ROUTES.idempotent, key: 'fixed', peer: false },
  {
    id: 'durable-first',
    label: 'durable peer first (TypeORM)',
    path: ROUTES.durable,
    key: 'fresh',
    peer: false,
  },
  {
    id: 'durable-replay',
    label: 'durable peer replay (TypeORM)',
    path: ROUTES.durable,
    key: 'fixed',
    peer: false,
  },
  { id: 'peer-first', label: 'peer first (Redis)', path: ROUTES.peer, key: 'fresh', peer: true },
  { id: 'peer-replay', label: 'peer replay (Redis)', path: ROUTES.peer, key: 'fixed', peer: true },
];

/**
 * The cases a phase runs, in table order: those of `--cases` (all when not given), less the
 * peer's when the server runs without it.
 */
export function selectedCases(
  cases: readonly BenchCase['id'][] | undefined,
  peer: boolean,
): BenchCase[] {
  return BENCH_CASES.filter(
    (benchCase) => (peer || !benchCase.peer) && (!cases || cases.includes(benchCase.id)),
  );
}

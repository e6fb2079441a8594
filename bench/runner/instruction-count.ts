import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Callgrind's counters of one thread, by event name (`Ir`, and `D1mr`… with `--cache-sim`). */
export type CallgrindEvents = Record<string, number>;

/**
 * The valgrind command line a server runs under for `--instructions`.
 *
 * @param simulateCache - also simulate the caches and branch predictor (`--cache-sim`): the
 *   events an estimate of cycles needs, at about twice the slowdown
 * @param lastLevel - valgrind's `--LL` (`size,associativity,line size`), when the cache it
 *   detects is not the one to simulate (`--cache-ll`)
 */
export function callgrindCommand(
  outFile: string,
  simulateCache = false,
  lastLevel?: string,
): string[] {
  return [
    'valgrind',
    '--tool=callgrind',
    // Function-level counts only: the run reads totals, and per-instruction data slows it down.
    '--dump-instr=no',
    // Start-up and warm-up run uninstrumented, several times faster: `countingOn` switches the
    // count on for each window only.
    '--instr-atstart=no',
    ...(simulateCache ? ['--cache-sim=yes', '--branch-sim=yes'] : []),
    ...(simulateCache && lastLevel ? [`--LL=${lastLevel}`] : []),
    `--callgrind-out-file=${outFile}`,
  ];
}

/**
 * The events the main thread of a process running under callgrind has counted so far, read with
 * `callgrind_control -e` (through vgdb). Only the main thread (`Th 1`) counts: V8's compiler
 * and collector threads run when they like, so counting them moves from window to window as
 * much as req/s does, where the main thread moves a few per cent.
 *
 * @param pid - the server's pid (valgrind runs the tool in the process it was started as)
 * @param host - the `HOST` the server was started with: vgdb names its pipes after it
 * @throws Error when callgrind_control fails or prints no count for thread 1
 */
export async function mainThreadEvents(pid: number, host: string): Promise<CallgrindEvents> {
  const { stdout } = await run('callgrind_control', ['-e', String(pid)], {
    env: { ...process.env, HOST: host },
  });
  // Within one line only: a count without thousands separators is a word too.
  const names = /^[ \t]*Totals:((?:[ \t]+\w+)+)[ \t]*$/m.exec(stdout)?.[1].trim().split(/\s+/);
  const counts = /^[ \t]*Th 1((?:[ \t]+[\d,.]+)+)[ \t]*$/m.exec(stdout)?.[1].trim().split(/\s+/);
  // No line for thread 1: it has run nothing since the count was switched on.
  if (names && !counts) return Object.fromEntries(names.map((name) => [name, 0]));
  if (!names || !counts || names.length !== counts.length) {
    throw new Error(`callgrind_control -e ${pid} printed no counts for thread 1:\n${stdout}`);
  }
  // callgrind prints "." for an event that never happened.
  return Object.fromEntries(
    names.map((name, i) => [name, counts[i] === '.' ? 0 : Number(counts[i].replace(/,/g, ''))]),
  );
}

/**
 * Switches callgrind's instrumentation on or off (`callgrind_control -i`): only a window's
 * requests are counted, and what runs between windows runs several times faster.
 * @param pid - the server's pid
 * @param host - the `HOST` the server was started with
 */
export async function countingOn(pid: number, host: string, on: boolean): Promise<void> {
  await run('callgrind_control', ['-i', on ? 'on' : 'off', String(pid)], {
    env: { ...process.env, HOST: host },
  });
}

/** The events of `after` minus those of `before`, each divided by `requests`. */
export function eventsPerRequest(
  before: CallgrindEvents,
  after: CallgrindEvents,
  requests: number,
): CallgrindEvents {
  return Object.fromEntries(
    Object.entries(after).map(([name, count]) => [name, (count - (before[name] ?? 0)) / requests]),
  );
}

/** What the cache and branch simulation found, per request. */
export interface SimulatedCosts {
  /** First-level instruction cache misses (`I1mr`). */
  instructionL1Misses: number;
  /** First-level data cache misses, reads and writes (`D1mr + D1mw`). */
  dataL1Misses: number;
  /** Last-level instruction misses (`ILmr`): code fetched from beyond the simulated caches. */
  instructionLlMisses: number;
  /** Last-level data misses, reads and writes (`DLmr + DLmw`). */
  dataLlMisses: number;
  /** Mispredicted conditional and indirect branches (`Bcm + Bim`). */
  branchMisses: number;
  /**
   * Estimated cycles, the estimate iai and iai-callgrind use: L1 hits + 5 × last-level hits +
   * 35 × memory accesses. It weighs the misses an instruction count leaves out; it knows
   * nothing of system calls or the host's other load.
   */
  cycles: number;
}

/** The simulated costs in `events`, or undefined when callgrind ran without `--cache-sim`. */
export function simulatedCosts(events: CallgrindEvents): SimulatedCosts | undefined {
  if (events.D1mr === undefined) return undefined;
  const sum = (...names: string[]) => names.reduce((total, name) => total + (events[name] ?? 0), 0);
  const accesses = sum('Ir', 'Dr', 'Dw');
  const l1Misses = sum('I1mr', 'D1mr', 'D1mw');
  const llMisses = sum('ILmr', 'DLmr', 'DLmw');
  return {
    instructionL1Misses: sum('I1mr'),
    dataL1Misses: sum('D1mr', 'D1mw'),
    instructionLlMisses: sum('ILmr'),
    dataLlMisses: sum('DLmr', 'DLmw'),
    branchMisses: sum('Bcm', 'Bim'),
    cycles: accesses - l1Misses + 5 * (l1Misses - llMisses) + 35 * llMisses,
  };
}

/**
 * Whether valgrind and callgrind_control are installed, so `--instructions` can fail before it
 * builds anything.
 */
export async function callgrindAvailable(): Promise<boolean> {
  try {
    await run('valgrind', ['--version']);
    await run('callgrind_control', ['-h']);
    return true;
  } catch {
    return false;
  }
}

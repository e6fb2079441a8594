import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The valgrind command line a server runs under for `--instructions`. */
export function callgrindCommand(outFile: string): string[] {
  return [
    'valgrind',
    '--tool=callgrind',
    // Function-level counts only: the run reads totals, and per-instruction data slows it down.
    '--dump-instr=no',
    `--callgrind-out-file=${outFile}`,
  ];
}

/**
 * Instructions the main thread of a process running under callgrind has executed so far, read
 * with `callgrind_control -e` (through vgdb). Only the main thread (`Th 1`) counts: V8's compiler
 * and collector threads run when they like, so counting them moves from window to window as
 * much as req/s does, where the main thread moves a few per cent.
 *
 * @param pid - the server's pid (valgrind runs the tool in the process it was started as)
 * @param host - the `HOST` the server was started with: vgdb names its pipes after it
 * @throws Error when callgrind_control fails or prints no count for thread 1
 */
export async function mainThreadInstructions(pid: number, host: string): Promise<number> {
  const { stdout } = await run('callgrind_control', ['-e', String(pid)], {
    env: { ...process.env, HOST: host },
  });
  const match = /^\s*Th 1\s+([\d,]+)\s*$/m.exec(stdout);
  if (!match) {
    throw new Error(`callgrind_control -e ${pid} printed no count for thread 1:\n${stdout}`);
  }
  return Number(match[1].replace(/,/g, ''));
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

import { execFileSync } from 'node:child_process';
import os from 'node:os';

/** Where the numbers were measured. */
export interface MachineInfo {
  cpuModel: string;
  cores: number;
  totalMemoryMb: number;
  os: string;
  node: string;
  postgres: string;
  /** Load average when the run started: a noisy neighbour shows here. */
  loadAverage: number[];
  /** Commit of the working tree, with `-dirty` when it has uncommitted changes. */
  commit?: string;
}

function gitCommit(): string | undefined {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain'], { encoding: 'utf8' }).trim();
    return dirty ? `${head}-dirty` : head;
  } catch {
    return undefined;
  }
}

/**
 * Describes this machine and the PostgreSQL server.
 * @param postgres - `server_version` of the bench database
 */
export function machineInfo(postgres: string): MachineInfo {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    totalMemoryMb: Math.round(os.totalmem() / 1024 / 1024),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    postgres,
    loadAverage: os.loadavg().map((value) => Math.round(value * 100) / 100),
    commit: gitCommit(),
  };
}

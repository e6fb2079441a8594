import type { Violation } from './check-history';
import type { HistoryEvent } from './history-event';
import type { WorkloadCounts } from './history-workload';

/** What one history run did and found, for the summary. */
export interface HistorySummary {
  replication: 'sync' | 'async';
  counts: WorkloadCounts;
  /** Faults injected, by kind (`failover`, `standby stall`). */
  faults: Record<string, number>;
  statuses: Record<string, number>;
  violations: Violation[];
  durationMs: number;
}

/** Answers by status (`r201` a replay, `err` no answer), as the chaos run counts them. */
export function countStatuses(history: HistoryEvent[]): Record<string, number> {
  const statuses: Record<string, number> = {};
  for (const event of history) {
    if (event.type !== 'answer') continue;
    const label =
      event.status === undefined ? 'err' : `${event.replayed ? 'r' : ''}${event.status}`;
    statuses[label] = (statuses[label] ?? 0) + 1;
  }
  return statuses;
}

const describeEvent = (event: HistoryEvent) => {
  const { type, at, ...rest } = event;
  return `    ${String(at).padStart(7)} ms ${type} ${JSON.stringify(rest)}`;
};

/** The summary printed at the end of a run: counts, violations by rule, each one's evidence. */
export function formatSummary(summary: HistorySummary): string {
  const byRule: Record<string, number> = {};
  for (const violation of summary.violations)
    byRule[violation.rule] = (byRule[violation.rule] ?? 0) + 1;
  const statuses = Object.entries(summary.statuses)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, n]) => `${status}:${n}`)
    .join(' ');
  const lines = [
    `replication:  ${summary.replication}`,
    `keys:         ${summary.counts.keys}`,
    `requests:     ${summary.counts.requests} (retries ${summary.counts.retries}, no answer ${summary.counts.transportErrors})`,
    `statuses:     ${statuses}`,
    `faults:       ${Object.entries(summary.faults)
      .map(([kind, n]) => `${kind} ${n}`)
      .join(', ')}`,
    `violations:   ${summary.violations.length}${
      summary.violations.length
        ? ` (${Object.entries(byRule)
            .map(([rule, n]) => `${rule} ${n}`)
            .join(', ')})`
        : ''
    }`,
    `duration:     ${(summary.durationMs / 1000).toFixed(1)} s`,
  ];
  for (const violation of summary.violations) {
    lines.push(`\n[${violation.rule}] ${violation.subject}: ${violation.message}`);
    lines.push(...violation.events.map(describeEvent));
  }
  return lines.join('\n');
}

import type { Violation } from './check-history';
import type { HistoryEvent } from './history-event';
import type { WorkloadCounts } from './history-workload';

/** What one history run did and found, for the summary. */
export interface HistorySummary {
  replication: 'sync' | 'async';
  counts: WorkloadCounts;
  /** Faults injected, by kind, as the history recorded them (`countFaults`). */
  faults: Record<string, number>;
  statuses: Record<string, number>;
  violations: Violation[];
  history: HistoryEvent[];
  /** Keys whose response the library reported sent but not stored (its `executed` event). */
  notStored: Set<string>;
  durationMs: number;
}

/**
 * Answers by status (`r201` a replay, `err` no answer), as the chaos run counts them; a 5xx
 * names its problem+json code, or `no code` (an error nothing mapped, listed on its own line).
 */
export function countStatuses(history: HistoryEvent[]): Record<string, number> {
  const statuses: Record<string, number> = {};
  for (const event of history) {
    if (event.type !== 'answer') continue;
    const code = event.uncoded !== undefined ? 'no code' : event.status! >= 500 && event.code;
    const label =
      event.status === undefined
        ? 'err'
        : `${event.replayed ? 'r' : ''}${event.status}${code ? `(${code})` : ''}`;
    statuses[label] = (statuses[label] ?? 0) + 1;
  }
  return statuses;
}

/** Faults the history recorded, by kind (`sigkill`, `proxy drop`, `failover`, …). */
export function countFaults(history: HistoryEvent[]): Record<string, number> {
  const faults: Record<string, number> = {};
  for (const event of history) {
    if (event.type === 'fault') faults[event.kind] = (faults[event.kind] ?? 0) + 1;
  }
  return faults;
}

/** Staged jobs, their deliveries and their effect rows, as the history recorded them. */
export function countJobs(history: HistoryEvent[]): Record<string, number> {
  const jobs: Record<string, number> = { 'job-staged': 0, 'job-delivery': 0, 'job-effect': 0 };
  for (const event of history) if (event.type in jobs) jobs[event.type]++;
  return jobs;
}

/** Handler runs, and keys whose handler ran more than once (taken over after a fault). */
export function countRuns(history: HistoryEvent[]): { runs: number; rerunKeys: number } {
  const perKey = new Map<string, number>();
  for (const event of history) {
    if (event.type === 'handler-start') perKey.set(event.key, (perKey.get(event.key) ?? 0) + 1);
  }
  const runs = [...perKey.values()];
  return { runs: runs.reduce((a, b) => a + b, 0), rerunKeys: runs.filter((n) => n > 1).length };
}

const describeEvent = (event: HistoryEvent) => {
  const { type, at, ...rest } = event;
  return `    ${String(at).padStart(7)} ms ${type} ${JSON.stringify(rest)}`;
};

/**
 * The summary printed at the end of a run: counts, violations by rule, and each one's evidence,
 * or the first `evidencePerRule` of each rule (an asynchronous run loses many keys alike).
 */
export function formatSummary(summary: HistorySummary, evidencePerRule = Infinity): string {
  const byRule: Record<string, number> = {};
  for (const violation of summary.violations)
    byRule[violation.rule] = (byRule[violation.rule] ?? 0) + 1;
  const statuses = Object.entries(summary.statuses)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, n]) => `${status}:${n}`)
    .join(' ');
  const { runs, rerunKeys } = countRuns(summary.history);
  const jobs = countJobs(summary.history);
  const lockLost = summary.history.filter((event) => event.type === 'lock-lost').length;
  const uncoded = summary.history.flatMap((event) =>
    event.type === 'answer' && event.uncoded !== undefined ? [event] : [],
  );
  const lines = [
    `replication:  ${summary.replication}`,
    `keys:         ${summary.counts.keys}`,
    `requests:     ${summary.counts.requests} (retries ${summary.counts.retries}, no answer ${summary.counts.transportErrors})`,
    `statuses:     ${statuses}`,
    `handlers:     ${runs} runs; ${rerunKeys} keys ran again after a fault cut their run short; ${lockLost} lock_lost events (a run found its lease taken over)`,
    `jobs:         ${jobs['job-staged']} staged (operations answered 201), ${jobs['job-delivery']} deliveries, ${jobs['job-effect']} effect rows on the final primary`,
    `webhooks:     ${summary.counts.webhookEvents} events, ${summary.counts.webhookDeliveries} signed deliveries (each event sent 2 or 3 times, and probed)`,
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
    `not stored:   ${summary.notStored.size} keys whose final answer the library could not store (logged, sent all the same)`,
    `no code:      ${uncoded.length} 5xx answers without a problem+json code (an error nothing mapped; the apps' logged errors are in the run's log)`,
    ...uncoded
      .slice(0, evidencePerRule)
      .map((event) => `    ${event.key} (${event.client}): ${event.status} ${event.uncoded}`),
    `duration:     ${(summary.durationMs / 1000).toFixed(1)} s`,
  ];
  const shown: Record<string, number> = {};
  for (const violation of summary.violations) {
    shown[violation.rule] = (shown[violation.rule] ?? 0) + 1;
    if (shown[violation.rule] > evidencePerRule) continue;
    lines.push(`\n[${violation.rule}] ${violation.subject}: ${violation.message}`);
    if (summary.notStored.has(violation.subject))
      lines.push("    (the library reported this key's answer sent but not stored)");
    lines.push(...violation.events.map(describeEvent));
  }
  for (const [rule, n] of Object.entries(byRule)) {
    if (n > evidencePerRule) lines.push(`\n[${rule}] ${n - evidencePerRule} more like these`);
  }
  return lines.join('\n');
}

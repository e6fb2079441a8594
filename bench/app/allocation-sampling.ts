import { Session } from 'node:inspector/promises';

/** Bytes between two samples of V8's sampling heap profiler, on average (its default is 32 KiB). */
const SAMPLING_INTERVAL_BYTES = 4096;

/**
 * Estimates the bytes the process allocates on V8's heap while on, with V8's sampling heap
 * profiler over the inspector: a sample every 4 KiB on average, objects the garbage collector
 * has freed since included, so the estimate is of everything allocated, not what is still
 * alive. Unlike CPU time it does not move with the host's load; what it allocates is what the
 * collector must later deal with, which the instruction count does not see. Off by default:
 * only the promises phase turns it on, for one window at a time.
 */
class AllocationSampling {
  private session?: Session;
  private sampling = false;

  /** Starts sampling (again, from zero). */
  async start(): Promise<void> {
    if (!this.session) {
      this.session = new Session();
      this.session.connect();
    }
    await this.session.post('HeapProfiler.startSampling', {
      samplingInterval: SAMPLING_INTERVAL_BYTES,
      // Not in @types/node 20's protocol types; V8 11 (Node 20) honours them.
      ...{ includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true },
    });
    this.sampling = true;
  }

  /**
   * Stops sampling; the bytes allocated since `start()`, as V8 estimates them from its samples
   * (0 when it was not sampling).
   */
  async stop(): Promise<number> {
    if (!this.session || !this.sampling) return 0;
    this.sampling = false;
    const { profile } = await this.session.post('HeapProfiler.stopSampling');
    let bytes = 0;
    const nodes = [profile.head];
    for (let node = nodes.pop(); node; node = nodes.pop()) {
      bytes += node.selfSize;
      nodes.push(...node.children);
    }
    return bytes;
  }
}

/** The bench server's one sampler, switched through `GET /health?allocations=on|off`. */
export const allocationSampling = new AllocationSampling();

/**
 * A small client of a Node process's inspector (`node --inspect=127.0.0.1:PORT`): the soak uses it to force a
 * garbage collection, read `process.memoryUsage()` and write heap snapshots of the server process, without any
 * hook in Stratus itself (the same build as users run, only started with `--inspect`).
 */
import { createWriteStream } from 'node:fs';
import WebSocket from 'ws';

type Pending = { resolve: (v: any) => void; reject: (e: Error) => void };

export class Inspector {
  private next = 1;
  private readonly pending = new Map<number, Pending>();
  private onChunk: ((chunk: string) => void) | null = null;

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: { message: string }; method?: string; params?: { chunk: string } };
      if (m.method === 'HeapProfiler.addHeapSnapshotChunk') return this.onChunk?.(m.params!.chunk);
      const p = m.id === undefined ? undefined : this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id!);
      if (m.error) p.reject(new Error(m.error.message));
      else p.resolve(m.result);
    });
  }

  /** Connects to the first target of the inspector at `port` (retried while the process starts). */
  static async connect(port: number, waitMs = 15_000): Promise<Inspector> {
    for (const t0 = Date.now(); ;) {
      try {
        const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
        const ws = new WebSocket(targets[0].webSocketDebuggerUrl, { maxPayload: 1 << 30 });
        await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
        return new Inspector(ws);
      } catch (e) {
        if (Date.now() - t0 > waitMs) throw new Error(`no inspector on port ${port}: ${(e as Error).message}`, { cause: e });
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  call<T = any>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** A full collection (twice: the first may leave what finalizers freed for the second). */
  async gc(): Promise<void> {
    await this.call('HeapProfiler.collectGarbage');
    await this.call('HeapProfiler.collectGarbage');
  }

  /** `process.memoryUsage()` of the inspected process. */
  async memory(): Promise<NodeJS.MemoryUsage> {
    const r = await this.call<{ result: { value: string } }>('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true });
    return JSON.parse(r.result.value) as NodeJS.MemoryUsage;
  }

  /** Writes a heap snapshot (the format DevTools and bench/heap-diff.ts read) to `file`. */
  async heapSnapshot(file: string): Promise<void> {
    const out = createWriteStream(file);
    this.onChunk = (chunk) => out.write(chunk);
    try {
      await this.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
    } finally {
      this.onChunk = null;
      await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    }
  }

  close(): void {
    this.ws.close();
  }
}

/**
 * V8's sampling heap profiler over the inspector protocol (the process runs with --inspect=HOST:0),
 * with what `node --heap-prof` cannot ask for: objects already collected by a minor GC (everything
 * allocated: allocation rate per site) or by a major GC only (what was promoted and then died: the
 * old-generation garbage that makes the heap balloon between mark-compacts).
 */
import { writeFileSync } from 'node:fs';

interface SampleNode { callFrame: { functionName: string; url: string; lineNumber: number }; selfSize: number; children: SampleNode[] }

/** The inspector's WebSocket URL from the process's stderr ("Debugger listening on ws://..."). */
export function inspectorUrl(stderr: string): string | undefined {
  // The last one: bin/skua-proxy.js restarts itself with its V8 flags (process.execve), and the
  // inspector of the process it replaced printed a URL first.
  return [...stderr.matchAll(/Debugger listening on (ws:\/\/\S+)/g)].at(-1)?.[1];
}

async function session(url: string): Promise<{ call: (method: string, params?: object) => Promise<unknown>; close: () => void }> {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  let id = 0;
  const waiting = new Map<number, (v: unknown) => void>();
  ws.onmessage = (e) => {
    const m = JSON.parse(String(e.data)) as { id?: number; result?: unknown; error?: unknown };
    if (m.id !== undefined) waiting.get(m.id)?.(m.error ? Promise.reject(new Error(JSON.stringify(m.error))) : m.result);
  };
  return {
    call: (method, params = {}) => new Promise((resolve) => { waiting.set(++id, resolve); ws.send(JSON.stringify({ id, method, params })); }),
    close: () => ws.close(),
  };
}

/** all: every allocation; promoted: what survived scavenges; retained: what a full GC at the end keeps. */
/**
 * process.memoryUsage() and V8's heap space statistics of the inspected process (physical sizes),
 * to tell the V8 heap from external memory (Buffers, native stream and HTTP/2 state) and malloc.
 */
export async function memoryBreakdown(url: string): Promise<string> {
  const s = await session(url);
  try {
    // process.getBuiltinModule: an ES-module main has no require in the inspector's scope.
    const expr = `(() => { const mb = (n) => (n / 1048576).toFixed(1);
      const m = process.memoryUsage(); const spaces = process.getBuiltinModule('node:v8').getHeapSpaceStatistics().map((x) => x.space_name.replace('_space', '') + ' ' + mb(x.physical_space_size) + '/' + mb(x.space_used_size)).join(', ');
      return 'rss ' + mb(m.rss) + ', heapTotal ' + mb(m.heapTotal) + ', heapUsed ' + mb(m.heapUsed) + ', external ' + mb(m.external) + ' (arrayBuffers ' + mb(m.arrayBuffers) + ') MB; spaces physical/used: ' + spaces; })()`;
    const r = await s.call('Runtime.evaluate', { expression: expr, includeCommandLineAPI: true, returnByValue: true }) as { result: { value?: string; description?: string } };
    return r.result.value ?? r.result.description ?? '';
  } finally {
    s.close();
  }
}

export type SamplingKind = 'all' | 'promoted' | 'retained';

/** Sample for `ms`; writes OUT.heapprofile (Chrome DevTools opens it) and returns the top sites as text. */
export async function sampleHeap(url: string, ms: number, kind: SamplingKind, out: string, top = 30): Promise<string> {
  const s = await session(url);
  try {
    await s.call('HeapProfiler.enable');
    await s.call('HeapProfiler.startSampling', {
      samplingInterval: 4096,
      includeObjectsCollectedByMinorGC: kind === 'all',
      includeObjectsCollectedByMajorGC: kind !== 'retained',
    });
    await new Promise((r) => setTimeout(r, ms));
    if (kind === 'retained') await s.call('HeapProfiler.collectGarbage');
    const { profile } = await s.call('HeapProfiler.stopSampling') as { profile: { head: SampleNode } };
    writeFileSync(out, JSON.stringify(profile));
    const sites = new Map<string, number>();
    let total = 0;
    const walk = (n: SampleNode, stack: string[]): void => {
      const f = n.callFrame;
      const here = `${f.functionName || '(anonymous)'} ${f.url.replace(/^file:\/\/.*?\/(packages|node_modules)\//, '$1/')}:${f.lineNumber + 1}`;
      if (n.selfSize) {
        // The allocating function and its two callers: enough to tell request paths apart.
        const key = [here, ...stack.slice(-2).reverse()].join(' < ');
        sites.set(key, (sites.get(key) ?? 0) + n.selfSize);
        total += n.selfSize;
      }
      for (const c of n.children) walk(c, [...stack, here]);
    };
    walk(profile.head, []);
    const lines = [...sites].sort((a, b) => b[1] - a[1]).slice(0, top)
      .map(([k, v]) => `${(v / 2 ** 20).toFixed(2).padStart(8)} MB ${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`);
    return `${kind === 'all' ? 'allocated' : kind === 'promoted' ? 'promoted (alive, or collected by a major GC)' : 'alive after a full GC'}: ${(total / 2 ** 20).toFixed(1)} MB in ${ms / 1000} s\n${lines.join('\n')}`;
  } finally {
    s.close();
  }
}

// Fakes for the charger's unit tests: a storage, the browser's cross-tab
// and page pieces, and the chargers of a test; the fake chargeonce itself,
// which the browser tests use too, is fake-chargeonce.ts.
import { afterEach, beforeEach, vi } from 'vitest';
import { createCharger, type Charger, type ChargerOptions } from '../src/charger.js';
import type { ChargerEvent } from '../src/events.js';
import type { ChargerState, KeyValueStorage } from '../src/types.js';
import type { FakeServer } from './fake-chargeonce.js';

export * from './fake-chargeonce.js';

export class MemoryStorage implements KeyValueStorage {
  readonly map = new Map<string, string>();
  getItem(k: string) {
    return this.map.get(k) ?? null;
  }
  setItem(k: string, v: string) {
    this.map.set(k, v);
  }
  removeItem(k: string) {
    this.map.delete(k);
  }
}

/** navigator.locks for tabs in one process: exclusive locks, ifAvailable, signal, released when the callback's promise ends. */
export class FakeLocks {
  private held = new Set<string>();
  private queue = new Map<string, (() => void)[]>();
  private delay: Promise<void> | null = null;
  /** How many times a lock was granted, and given back: what a test waits for, rather than for time to pass. */
  granted = 0;
  released = 0;

  /** The next handover to a waiting tab waits until the returned function is called (between tabs, a grant crosses processes). */
  delayNextGrant(): () => void {
    let go!: () => void;
    this.delay = new Promise((r) => (go = r));
    return go;
  }

  request(name: string, opts: { ifAvailable?: boolean; signal?: AbortSignal }, cb: (lock: { name: string } | null) => unknown): Promise<unknown> {
    const run = async () => {
      this.held.add(name);
      this.granted++;
      try {
        return await cb({ name });
      } finally {
        this.held.delete(name);
        this.released++;
        const next = this.queue.get(name)?.shift();
        const later = this.delay;
        this.delay = null;
        if (later) void later.then(() => next?.());
        else next?.();
      }
    };
    if (!this.held.has(name)) return run();
    if (opts.ifAvailable) return Promise.resolve(cb(null));
    return new Promise((resolve, reject) => {
      const go = () => resolve(run());
      const q = this.queue.get(name) ?? [];
      q.push(go);
      this.queue.set(name, q);
      opts.signal?.addEventListener('abort', () => {
        const i = q.indexOf(go);
        if (i >= 0) q.splice(i, 1);
        reject(new DOMException('aborted', 'AbortError'));
      });
    });
  }

  /** A tab that dies holding its lock: the browser releases it. */
  isHeld(name: string) {
    return this.held.has(name);
  }

  /** The names held now, by any tab. */
  heldNames(): string[] {
    return [...this.held];
  }
}

/** A window-like event target for online/offline/visibilitychange/pageshow. */
export class FakeWindow {
  private readonly fns = new Map<string, Set<(e: Event) => void>>();
  onLine = true;
  visible = true;
  addEventListener = (t: string, f: (e: Event) => void) => {
    const s = this.fns.get(t) ?? new Set();
    s.add(f);
    this.fns.set(t, s);
  };
  removeEventListener = (t: string, f: (e: Event) => void) => {
    this.fns.get(t)?.delete(f);
  };
  fire(t: string, extra: Record<string, unknown> = {}) {
    const e = Object.assign(new Event(t), extra);
    for (const f of [...(this.fns.get(t) ?? [])]) f(e);
  }
  listeners(t: string) {
    return this.fns.get(t)?.size ?? 0;
  }
}

/**
 * A charger of the tests against server: polling, no other tabs, a fixed
 * jitter, keys key-1, key-2, …; over replaces any of that. It is pushed on
 * chargers, for the test file to close; what it emitted and every state it
 * went through are recorded.
 */
export function testCharger(server: FakeServer, chargers: Charger[], over: Partial<ChargerOptions> = {}) {
  const events: ChargerEvent[] = [];
  const states: ChargerState[] = [];
  let n = 0;
  const mintKey = vi.fn(() => `key-${++n}`);
  const c = createCharger({
    endpoint: 'https://api.example/graphql',
    publishableKey: 'co_pk_test',
    session: 'cs_test_secret',
    storage: new MemoryStorage(),
    live: 'poll',
    crossTab: false,
    fetch: server.fetch,
    mintKey,
    retry: { baseMs: 100, capMs: 2_000, budgetMs: 10_000, maxAttempts: 5 },
    environment: { random: () => 0.5 },
    onEvent: (e) => events.push(e),
    ...over,
  });
  c.subscribe((s) => states.push(s));
  chargers.push(c);
  return { c, events, states, mintKey };
}

/**
 * The chargers of a test file: fake timers for each test, and after it
 * its chargers closed, real timers and globals back. The function it
 * returns makes one (testCharger) with the file's defaults under over.
 */
export function chargersPerTest(defaults: Partial<ChargerOptions> = {}) {
  let chargers: Charger[] = [];
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  });
  afterEach(() => {
    for (const c of chargers) c.close();
    chargers = [];
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });
  return (server: FakeServer, over: Partial<ChargerOptions> = {}) => testCharger(server, chargers, { ...defaults, ...over });
}

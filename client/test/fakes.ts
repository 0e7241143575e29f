// Fakes for the charger's tests: a storage, a chargeonce that charges each
// key at most once (and can lose answers), and the browser's cross-tab
// pieces.
import { afterEach, beforeEach, vi } from 'vitest';
import { createCharger, type Charger, type ChargerOptions } from '../src/charger.js';
import type { ChargerEvent } from '../src/events.js';
import type { Charge, ChargerState, KeyValueStorage } from '../src/types.js';

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

export interface SentRequest {
  operationName: string;
  variables: { idempotencyKey: string; input?: Record<string, unknown>; checkoutSession?: string };
  headers: Headers;
}

/** action: PROCESSING with a nextAction (3-D Secure) until finish(). */
type Script = 'charge' | 'lose-after-charge' | 'network' | 'html-502' | 'processing' | 'action' | { code: string; http?: number; retryAfterMs?: number; retryAfter?: string };

type Stored = { input: unknown; status: 'SUCCEEDED' | 'FAILED' | 'PROCESSING'; action?: boolean; failure?: string; captured?: boolean };

/** When the fake's authorizations lapse. */
export const authorizationExpiresAt = '2026-01-08T00:00:00Z';

/**
 * The charge of key as chargeonce answers it: an AUTOMATIC one captured in
 * full, a MANUAL one an open authorization until the merchant captures it
 * (captured).
 */
export function chargeOf(key: string, input: unknown, captured = false): Charge {
  const details = { id: `ch_${key}`, amount: 2500, currency: 'USD', providerChargeId: `p_${key}`, createdAt: '2026-01-01T00:00:00Z' };
  if ((input as { captureMethod?: string } | null)?.captureMethod === 'MANUAL' && !captured) {
    return { ...details, captureStatus: 'UNCAPTURED', amountCaptured: 0, amountCapturable: 2500, authorizationExpiresAt };
  }
  return { ...details, captureStatus: 'CAPTURED', amountCaptured: 2500, amountCapturable: 0, authorizationExpiresAt: null };
}

export const challengeUrl = (key: string) => `https://bank.example/challenge/${key}`;
export const challengeExpiresAt = '2099-01-01T00:10:00Z';

/**
 * A chargeonce in memory: chargeCard charges a key once and replays it; a
 * script says what each next chargeCard request meets.
 */
export class FakeServer {
  readonly requests: SentRequest[] = [];
  readonly charges = new Map<string, Stored>();
  script: Script[] = [];
  /** Every chargeCard and chargeStatus waits for this before answering, when set. */
  gate: Promise<void> | null = null;
  decline = false;

  get chargeCards() {
    return this.requests.filter((r) => r.operationName === 'ChargeCard');
  }

  /** The provider's final word on key (for a FAILED one, failure is its code). */
  finish(key: string, status: 'SUCCEEDED' | 'FAILED' = 'SUCCEEDED', failure?: string) {
    const c = this.charges.get(key);
    if (c) {
      c.status = status;
      c.action = false;
      if (failure) c.failure = failure;
    }
  }

  /** The merchant's server captured key's authorization in full. */
  capture(key: string) {
    const c = this.charges.get(key);
    if (c) c.captured = true;
  }

  /** The shopper authenticated: the provider goes on with the charge, no nextAction any more. */
  authenticated(key: string) {
    const c = this.charges.get(key);
    if (c) c.action = false;
  }

  readonly fetch: typeof fetch = async (_url, init) => {
    const body = JSON.parse(String(init?.body)) as { operationName: string; variables: SentRequest['variables'] };
    const req: SentRequest = { operationName: body.operationName, variables: body.variables, headers: new Headers(init?.headers) };
    this.requests.push(req);
    if (this.gate) await this.gate;
    if (init?.signal?.aborted) throw new DOMException('aborted', 'AbortError');
    const key = body.variables.idempotencyKey;
    if (body.operationName === 'ChargeStatus') {
      const c = this.charges.get(key);
      return json({ data: { chargeStatus: c ? this.payload(key, false) : null } });
    }
    const step = this.script.shift() ?? 'charge';
    if (step === 'network') throw new TypeError('Failed to fetch');
    if (step === 'html-502') return new Response('<html>Bad Gateway</html>', { status: 502, headers: { 'Content-Type': 'text/html' } });
    if (typeof step === 'object') {
      const headers: Record<string, string> = step.retryAfter ? { 'Retry-After': step.retryAfter } : {};
      return json(
        { errors: [{ message: step.code, extensions: { code: step.code, ...(step.retryAfterMs ? { retryAfterMs: step.retryAfterMs } : {}) } }] },
        step.http ?? 200,
        headers,
      );
    }
    const existing = this.charges.get(key);
    let replayed = false;
    if (existing) {
      if (JSON.stringify(existing.input) !== JSON.stringify(body.variables.input)) {
        return json({ errors: [{ message: 'reused', extensions: { code: 'IDEMPOTENCY_KEY_REUSED' } }] });
      }
      replayed = true;
    } else {
      const waits = step === 'processing' || step === 'action';
      this.charges.set(key, { input: body.variables.input, status: waits ? 'PROCESSING' : this.decline ? 'FAILED' : 'SUCCEEDED', action: step === 'action' });
    }
    if (step === 'lose-after-charge') throw new TypeError('Failed to fetch');
    return json({ data: { chargeCard: this.payload(key, replayed) } });
  };

  payload(key: string, replayed: boolean) {
    const c = this.charges.get(key)!;
    return {
      idempotencyKey: key,
      status: c.status,
      replayed,
      retryAfterMs: c.status === 'PROCESSING' ? 500 : null,
      expiresAt: c.status === 'PROCESSING' ? null : '2099-01-01T00:00:00Z',
      charge: c.status === 'SUCCEEDED' ? chargeOf(key, c.input, c.captured) : null,
      failure: c.status === 'FAILED' ? { code: c.failure ?? 'card_declined', message: 'The card was declined.' } : null,
      nextAction: c.status === 'PROCESSING' && c.action ? { type: 'REDIRECT', url: challengeUrl(key), expiresAt: challengeExpiresAt } : null,
    };
  }
}

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
}

/** navigator.locks for tabs in one process: exclusive locks, ifAvailable, signal, released when the callback's promise ends. */
export class FakeLocks {
  private held = new Set<string>();
  private queue = new Map<string, (() => void)[]>();
  private delay: Promise<void> | null = null;

  /** The next handover to a waiting tab waits until the returned function is called (between tabs, a grant crosses processes). */
  delayNextGrant(): () => void {
    let go!: () => void;
    this.delay = new Promise((r) => (go = r));
    return go;
  }

  request(name: string, opts: { ifAvailable?: boolean; signal?: AbortSignal }, cb: (lock: { name: string } | null) => unknown): Promise<unknown> {
    const run = async () => {
      this.held.add(name);
      try {
        return await cb({ name });
      } finally {
        this.held.delete(name);
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

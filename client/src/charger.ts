// The runner: createCharger() keeps a state, feeds every happening to
// step() as an event, and performs the effects it returns with fetch,
// timers, storage, the live stream, the sender lock and the tabs' channel.
// Everything that decides lives in machine.ts; this file only does.
import { retryPolicy } from './backoff.js';
import { createCrossTab, type CrossTab, type CrossTabEnv, type TabMessage } from './crosstab.js';
import { AbortError, AttemptOpenError, ChargeRejectedError, ChargerStateError, UnknownOutcomeError } from './errors.js';
import type { ChargerEvent } from './events.js';
import { openSse, openWs } from './live.js';
import { initialState, machineDefaults, progressOf, step, type Effect, type MachineConfig, type MachineEvent, type Result } from './machine.js';
import { hash, readRecord, recordName, sameInput, type AttemptRecord } from './record.js';
import { resolveStorage, webStorage, type SafeStorage, type StorageSpec } from './storage.js';
import { chargeCardDocument, chargeStatusDocument, post, type Answer } from './transport.js';
import type { ChargeCardInput, ChargerState, LiveMode, Outcome, PayInput, RetryOptions } from './types.js';

export interface ChargerOptions {
  /** chargeonce's /graphql URL. */
  endpoint: string;
  /** A publishable key (co_pk_…), sent as Authorization: Bearer. */
  publishableKey?: string;
  /** Headers for every request, e.g. { Authorization: 'Bearer co_sk_…' } server to server. */
  headers?: Record<string, string>;
  /** The checkout session's client secret: sent as input.checkoutSession, and the default scope. */
  session?: string;
  /** What one attempt belongs to (one open attempt per scope): the session by default. */
  scope?: string;
  /** Where the attempt record lives: 'session' (default), 'local' (shared by tabs), or your own. */
  storage?: StorageSpec;
  /** How PROCESSING is followed: 'sse' (default), 'ws' or 'poll'; a stream that fails falls back to polling. */
  live?: LiveMode;
  /** The websocket URL for live: 'ws' (endpoint with ws(s): by default). */
  wsEndpoint?: string;
  /** One sender per scope across tabs (default true). */
  crossTab?: boolean;
  onEvent?: (e: ChargerEvent) => void;
  fetch?: typeof fetch;
  /** Mints a key for a new attempt: crypto.randomUUID() by default. */
  mintKey?: () => string;
  retry?: RetryOptions;
  /** A request unanswered after this long is a lost one (default 30 s). */
  requestTimeoutMs?: number;
  /** The browser, for tests: globalThis's by default. */
  environment?: ChargerEnvironment;
}

/** The parts of the browser the charger listens to; tests pass fakes. */
export interface ChargerEnvironment extends Partial<CrossTabEnv> {
  addEventListener?: (type: string, fn: (e: Event) => void) => void;
  removeEventListener?: (type: string, fn: (e: Event) => void) => void;
  /** navigator.onLine. */
  onLine?: () => boolean;
  /** document.visibilityState === 'visible'. */
  visible?: () => boolean;
  now?: () => number;
  random?: () => number;
  WebSocket?: typeof WebSocket;
}

export interface PayOptions {
  /** Stops waiting (an AbortError), never the attempt: it stays persisted and resume() follows it. */
  signal?: AbortSignal;
}

export interface Charger {
  readonly state: ChargerState;
  /** Calls fn on every state change; returns the unsubscribe function. */
  subscribe(fn: (state: ChargerState) => void): () => void;
  /** Charges input once: the outcome (a decline is FAILED, not an error), or a typed error. */
  pay(input: PayInput, options?: PayOptions): Promise<Outcome>;
  /** Follows this scope's open attempt to its outcome; null when there is none. */
  resume(): Promise<Outcome | null>;
  /** After SUCCEEDED, FAILED or a rejection only: the next pay() gets a new key. Throws otherwise. */
  reset(): void;
  on(type: 'event', fn: (e: ChargerEvent) => void): () => void;
  /** Stops timers, streams and listeners; waiting promises reject with AbortError. */
  close(): void;
}

interface Waiter {
  resolve(v: Outcome | null): void;
  reject(e: Error): void;
}

export const requestTimeoutMsDefault = 30_000;

export function createCharger(options: ChargerOptions): Charger {
  return new Runner(options);
}

class Runner implements Charger {
  private current: ChargerState = initialState;
  private readonly subscribers = new Set<(s: ChargerState) => void>();
  private readonly listeners = new Set<(e: ChargerEvent) => void>();
  private readonly waiters = new Set<Waiter>();
  private inflight: { input: ChargeCardInput; promise: Promise<Outcome> } | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private readonly config: MachineConfig;
  private readonly storage: SafeStorage;
  private readonly name: string;
  private readonly scope: string;
  private readonly headers: Record<string, string>;
  private readonly fetch: typeof fetch;
  private readonly env: ChargerEnvironment;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly tab = hash(String(Math.random()) + String(Date.now()));
  private readonly tabs: CrossTab | null;
  private readonly stopAll = new AbortController();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private wire = 0;
  private question = 0;
  private stream: { gen: number; stop: () => void } | null = null;
  private streamGen = 0;
  private holding = false;
  private closed = false;
  private readonly unlisten: (() => void)[] = [];

  constructor(private readonly o: ChargerOptions) {
    const env = o.environment ?? browser();
    this.env = env;
    this.now = env.now ?? Date.now;
    this.random = env.random ?? Math.random;
    this.fetch = o.fetch ?? ((...a: Parameters<typeof fetch>) => globalThis.fetch(...a));
    this.config = { ...machineDefaults, retry: retryPolicy(o.retry), live: o.live ?? 'sse' };
    if (o.onEvent) this.listeners.add(o.onEvent);
    this.headers = { ...(o.publishableKey ? { Authorization: `Bearer ${o.publishableKey}` } : {}), ...o.headers };
    const credential = this.headers.Authorization ?? this.headers.authorization ?? '';
    this.scope = o.scope ?? o.session ?? 'default';
    this.name = recordName(this.scope, credential);
    // Heard by on() listeners added right after createCharger, too.
    this.storage = resolveStorage(o.storage, (reason) => queueMicrotask(() => this.emit({ type: 'storage-fallback', reason })));
    this.tabs = o.crossTab === false ? null : this.crossTab(env);
    this.listen(env);
  }

  get state(): ChargerState {
    return this.current;
  }

  subscribe(fn: (s: ChargerState) => void): () => void {
    this.subscribers.add(fn);
    return () => void this.subscribers.delete(fn);
  }

  on(_type: 'event', fn: (e: ChargerEvent) => void): () => void {
    this.listeners.add(fn);
    return () => void this.listeners.delete(fn);
  }

  pay(input: PayInput, options: PayOptions = {}): Promise<Outcome> {
    const full: ChargeCardInput = { ...input };
    if (this.o.session && !full.checkoutSession) full.checkoutSession = this.o.session;
    if (this.closed) return Promise.reject(new ChargerStateError('closed', 'the charger is closed'));
    if (options.signal?.aborted) return Promise.reject(new AbortError(this.current.key));
    let promise: Promise<Outcome>;
    if (this.inflight && sameInput(this.inflight.input, full)) {
      promise = this.inflight.promise; // a double click: the same attempt, the same promise
    } else {
      promise = this.enqueue(async () => {
        const leader = await this.lead();
        return { wait: this.call((key) => ({ type: 'Pay', input: full, key, record: this.load(), leader, now: this.now() })) };
      }) as Promise<Outcome>;
      const entry = { input: full, promise };
      this.inflight ??= entry;
      const clear = () => {
        if (this.inflight === entry) this.inflight = null;
      };
      promise.then(clear, clear);
    }
    return options.signal ? this.abortable(promise, options.signal) : promise;
  }

  resume(): Promise<Outcome | null> {
    if (this.closed) return Promise.reject(new ChargerStateError('closed', 'the charger is closed'));
    return this.enqueue(async () => {
      const leader = await this.lead();
      return { wait: this.call(() => ({ type: 'Resume', record: this.load(), leader, now: this.now() })) };
    });
  }

  reset(): void {
    let refused: Error | null = null;
    this.dispatch({ type: 'Reset' }, { resolve: () => {}, reject: (e) => (refused = e) });
    if (refused) throw refused;
    this.inflight = null;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.clearTimer();
    this.stopStream();
    this.stopAll.abort();
    for (const u of this.unlisten) u();
    this.tabs?.close();
    this.holding = false;
    for (const w of this.waiters) w.reject(new AbortError(this.current.key));
    this.waiters.clear();
  }

  // ---- dispatching -----------------------------------------------------------

  /**
   * Runs fn after the calls before it have taken the lock and been
   * dispatched (not after their outcomes), and resolves with the outcome fn
   * starts waiting for.
   */
  private enqueue(fn: () => Promise<{ wait: Promise<Outcome | null> }>): Promise<Outcome | null> {
    const run = this.chain.then(fn);
    this.chain = run.catch(() => {});
    return run.then((r) => r.wait);
  }

  /** Dispatches the event made by make, with a fresh key if step asks for one, and waits for the caller's result. */
  private call(make: (key: string) => MachineEvent): Promise<Outcome | null> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new AbortError(this.current.key));
      this.dispatch(make(''), { resolve, reject }, make);
    });
  }

  private dispatch(e: MachineEvent, caller?: Waiter, remake?: (key: string) => MachineEvent): void {
    if (this.closed) return;
    const prev = this.current;
    let { state, effects } = step(prev, e, this.config);
    if (remake && state.key === '') {
      // A new attempt starts: only now is a key minted.
      ({ state, effects } = step(prev, remake(this.mint()), this.config));
    }
    this.current = state;
    let answered = false;
    for (const fx of effects) {
      if (fx.type === 'Reply') {
        if (caller) settle(caller, fx.result);
        answered = true;
      } else if (fx.type === 'Settle') {
        if (caller && !answered) settle(caller, fx.result);
        answered = true;
        const ws = [...this.waiters];
        this.waiters.clear();
        for (const w of ws) settle(w, fx.result);
      } else {
        this.perform(fx);
      }
    }
    if (caller && !answered) this.waiters.add(caller);
    this.syncLock();
    if (state !== prev) for (const fn of [...this.subscribers]) fn(state);
  }

  private perform(fx: Exclude<Effect, { type: 'Reply' | 'Settle' }>): void {
    switch (fx.type) {
      case 'Persist':
        return this.persist(fx.record);
      case 'Forget':
        return this.storage.remove(this.name);
      case 'Send':
        return this.send(fx.key, fx.input, fx.attempt);
      case 'AskStatus':
        return this.ask(fx.key);
      case 'Subscribe':
        return this.follow(fx.key, fx.mode);
      case 'Unsubscribe':
        return this.stopStream();
      case 'SetTimer':
        this.clearTimer();
        this.timer = setTimeout(() => {
          this.timer = null;
          this.dispatch({ type: 'TimerFired', now: this.now() });
        }, fx.ms);
        return;
      case 'ClearTimer':
        return this.clearTimer();
      case 'Broadcast':
        return this.tabs?.post({ from: this.tab, kind: 'progress', progress: fx.progress });
      case 'Emit':
        return this.emit(fx.event);
    }
  }

  // ---- effects -------------------------------------------------------------

  private persist(r: AttemptRecord): void {
    const old = readRecord(this.storage.get(this.name), this.now());
    const createdAt = r.createdAt || (old?.key === r.key ? old.createdAt : 0) || this.now();
    this.storage.set(this.name, JSON.stringify({ ...r, scope: this.scope, createdAt }));
  }

  private load(): AttemptRecord | null {
    return readRecord(this.storage.get(this.name), this.now());
  }

  private send(key: string, input: ChargeCardInput, attempt: number): void {
    const token = ++this.wire;
    this.emit({ type: 'send', key, attempt, operation: 'chargeCard' });
    void this.request('ChargeCard', chargeCardDocument, 'chargeCard', { idempotencyKey: key, input }).then((answer) => {
      if (this.closed || token !== this.wire) return;
      this.heard(key, 'chargeCard', answer);
      this.dispatch({ type: 'Answered', answer, now: this.now(), jitter: this.random() });
    });
  }

  private ask(key: string): void {
    const token = ++this.question;
    this.emit({ type: 'send', key, attempt: this.current.attempt ?? 0, operation: 'chargeStatus' });
    void this.request('ChargeStatus', chargeStatusDocument, 'chargeStatus', { idempotencyKey: key, ...this.sessionVar() }).then((answer) => {
      if (this.closed || token !== this.question) return;
      this.heard(key, 'chargeStatus', answer);
      this.dispatch({ type: 'StatusAnswered', answer, now: this.now(), jitter: this.random() });
    });
  }

  private request(operationName: string, query: string, field: string, variables: Record<string, unknown>): Promise<Answer> {
    return post({ operationName, query, variables }, field, {
      fetch: this.fetch,
      endpoint: this.o.endpoint,
      headers: this.headers,
      signal: this.stopAll.signal,
      timeoutMs: this.o.requestTimeoutMs ?? requestTimeoutMsDefault,
      now: this.now,
    });
  }

  private heard(key: string, operation: 'chargeCard' | 'chargeStatus', a: Answer): void {
    const e: Extract<ChargerEvent, { type: 'answer' }> = { type: 'answer', key, operation };
    if (a.kind !== 'lost' || a.http !== undefined) e.http = a.http!;
    if (a.kind === 'payload') {
      e.status = a.payload?.status ?? null;
      if (a.payload) e.replayed = a.payload.replayed;
    } else if (a.kind === 'error') {
      e.code = a.error.code;
    } else {
      e.reason = a.reason;
    }
    this.emit(e);
  }

  /** The session the attempt pays, for chargeStatus and chargeUpdated. */
  private sessionVar(): { checkoutSession?: string } {
    const s = this.current.input?.checkoutSession ?? this.o.session;
    return s ? { checkoutSession: s } : {};
  }

  private follow(key: string, mode: 'sse' | 'ws'): void {
    this.stopStream();
    const gen = ++this.streamGen;
    let opened = false;
    const mine = () => !this.closed && this.stream?.gen === gen;
    const live = {
      fetch: this.fetch,
      endpoint: this.o.endpoint,
      headers: this.headers,
      authorization: this.headers.Authorization ?? this.headers.authorization ?? '',
      variables: { idempotencyKey: key, ...this.sessionVar() },
      ...(this.o.wsEndpoint ? { wsEndpoint: this.o.wsEndpoint } : {}),
      ...(this.env.WebSocket ? { WebSocket: this.env.WebSocket } : {}),
    };
    const handlers = {
      next: (payload: Parameters<Parameters<typeof openSse>[1]['next']>[0]) => {
        if (!mine()) return;
        if (!opened) {
          opened = true;
          this.emit({ type: 'live-open', key, mode });
        }
        this.dispatch({ type: 'LiveNext', payload, now: this.now() });
      },
      failed: (reason: string) => {
        if (!mine()) return;
        this.stream = null;
        this.emit({ type: 'live-failed', key, mode, reason });
        this.dispatch({ type: 'LiveFailed', reason, now: this.now() });
      },
    };
    this.stream = { gen, stop: () => {} };
    const stop = mode === 'ws' ? openWs(live, handlers) : openSse(live, handlers);
    if (this.stream?.gen === gen) this.stream.stop = stop;
  }

  private stopStream(): void {
    const s = this.stream;
    this.stream = null;
    s?.stop();
  }

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private emit(e: ChargerEvent): void {
    for (const fn of [...this.listeners]) {
      try {
        fn(e);
      } catch {
        // a listener's bug is not the attempt's
      }
    }
  }

  private mint(): string {
    return this.o.mintKey ? this.o.mintKey() : uuid();
  }

  private abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        reject(new AbortError(this.current.key));
        this.dispatch({ type: 'Abort' });
      };
      signal.addEventListener('abort', onAbort, { once: true });
      p.then(
        (v) => {
          signal.removeEventListener('abort', onAbort);
          resolve(v);
        },
        (err: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(err as Error);
        },
      );
    });
  }

  // ---- tabs ----------------------------------------------------------------

  private crossTab(env: ChargerEnvironment): CrossTab {
    const shared = this.storage.shared ? (this.o.storage === 'local' ? webStorage('localStorage').storage : null) : webStorage('localStorage').storage;
    const tabs = createCrossTab(
      'chargeonce:' + this.name.slice(this.name.lastIndexOf(':') + 1),
      this.tab,
      { ...env, shared: env.shared !== undefined ? env.shared : shared, now: this.now },
      (m) => this.heardTab(m),
    );
    if (tabs.locks !== 'web-locks' || tabs.channel !== 'broadcast-channel') {
      queueMicrotask(() => this.emit({ type: 'crosstab', locks: tabs.locks, channel: tabs.channel }));
    }
    return tabs;
  }

  private heardTab(m: TabMessage): void {
    const s = this.current;
    if (m.kind === 'query') {
      if (!s.remote && s.key && s.kind !== 'idle') this.tabs?.post({ from: this.tab, kind: 'progress', progress: progressOf(s) });
      return;
    }
    if (m.progress.key && (s.remote || s.kind === 'idle')) this.emit({ type: 'remote', key: m.progress.key, kind: m.progress.kind });
    this.dispatch({ type: 'RemoteProgress', progress: m.progress, now: this.now() });
  }

  /** Takes the scope's sender lock when this call may have to send. */
  private async lead(): Promise<boolean> {
    if (!this.tabs || this.holding) return true;
    const s = this.current.kind;
    if (!this.current.remote && s !== 'idle' && s !== 'unknown') return true; // runs here already, or answered
    this.holding = await this.tabs.tryAcquire();
    return this.holding;
  }

  /** Holds the lock exactly while this tab sends; queues for it while it waits on another tab. */
  private syncLock(): void {
    if (!this.tabs || this.closed) return;
    const s = this.current;
    const active = s.kind === 'sending' || s.kind === 'retrying' || s.kind === 'paused' || s.kind === 'processing';
    if (active && !s.remote) return;
    if (this.holding) {
      this.holding = false;
      this.tabs.release();
    }
    if (active && s.remote && this.waiters.size > 0) {
      this.tabs.post({ from: this.tab, kind: 'query' });
      this.tabs.waitFor(() => {
        this.holding = true;
        this.dispatch({ type: 'Leader', key: '', record: this.load(), now: this.now() }, undefined, (key) => ({
          type: 'Leader',
          key,
          record: this.load(),
          now: this.now(),
        }));
      });
    }
  }

  // ---- the page ------------------------------------------------------------

  private listen(env: ChargerEnvironment): void {
    const add = env.addEventListener;
    if (!add) return;
    const on = (type: string, fn: (e: Event) => void) => {
      add(type, fn);
      this.unlisten.push(() => env.removeEventListener?.(type, fn));
    };
    const visibility = () => this.dispatch(env.visible?.() === false ? { type: 'Hidden', now: this.now() } : { type: 'Visible', now: this.now() });
    on('online', () => this.dispatch({ type: 'Online', now: this.now() }));
    on('offline', () => this.dispatch({ type: 'Offline', now: this.now() }));
    on('visibilitychange', visibility);
    on('pageshow', (e) => {
      // A back/forward-cache restore: timers may have slept; look again at once.
      if ((e as PageTransitionEvent).persisted) this.dispatch({ type: 'Visible', now: this.now() });
    });
    if (env.onLine?.() === false) this.dispatch({ type: 'Offline', now: this.now() });
    if (env.visible?.() === false) this.dispatch({ type: 'Hidden', now: this.now() });
  }
}

function settle(w: Waiter, r: Result): void {
  if ('ok' in r) {
    w.resolve(r.ok);
    return;
  }
  const e = r.error;
  switch (e.type) {
    case 'rejected':
      return w.reject(new ChargeRejectedError(e.key, e.error.code, e.error.message, e.error.field));
    case 'unknown':
      return w.reject(new UnknownOutcomeError(e.key, e.expiresAt));
    case 'open':
      return w.reject(new AttemptOpenError(e.key));
    case 'state':
      return w.reject(new ChargerStateError(e.state, e.message));
  }
}

/** A UUID v4: crypto.randomUUID where the page is a secure context, else from getRandomValues. */
export function uuid(): string {
  const c = globalThis.crypto;
  if (typeof c?.randomUUID === 'function') return c.randomUUID();
  const b = new Uint8Array(16);
  c.getRandomValues(b);
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** globalThis's window, navigator and document, as far as they exist. */
function browser(): ChargerEnvironment {
  const g = globalThis as unknown as {
    addEventListener?: (t: string, f: (e: Event) => void) => void;
    removeEventListener?: (t: string, f: (e: Event) => void) => void;
    navigator?: { onLine?: boolean; locks?: LockManager };
    document?: { visibilityState?: string };
    BroadcastChannel?: typeof BroadcastChannel;
    WebSocket?: typeof WebSocket;
  };
  const env: ChargerEnvironment = {};
  if (typeof g.addEventListener === 'function') {
    // visibilitychange fires on document, the others on window.
    const target = (t: string) => (t === 'visibilitychange' && g.document ? (g.document as unknown as EventTarget) : (g as unknown as EventTarget));
    env.addEventListener = (t, f) => target(t).addEventListener(t, f);
    env.removeEventListener = (t, f) => target(t).removeEventListener(t, f);
  }
  if (g.navigator && typeof g.navigator.onLine === 'boolean') env.onLine = () => g.navigator!.onLine !== false;
  if (g.document) env.visible = () => g.document!.visibilityState !== 'hidden';
  // Tabs exist only in a page: in Node (server to server) an open channel would keep the process alive.
  if (g.document && g.navigator?.locks) env.locks = g.navigator.locks;
  if (g.document && g.BroadcastChannel) env.BroadcastChannel = g.BroadcastChannel;
  if (g.WebSocket) env.WebSocket = g.WebSocket;
  return env;
}

// The runner: createCharger() keeps a state, feeds every happening to
// step() as an event, and performs the effects it returns with fetch,
// timers, storage, the live stream, the sender lock and the tabs' channel.
// Everything that decides lives in machine.ts; this file only does.
import { retryPolicy } from './backoff.js';
import { AbortError, AttemptOpenError, ChargeRejectedError, ChargerStateError, UnknownOutcomeError } from './errors.js';
import type { ChargerEvent } from './events.js';
import { initialState, machineDefaults, progressOf, step, type MachineEvent, type Result } from './machine.js';
import { browser, listen, tabs, type ChargerEnvironment, type Tabs } from './page.js';
import { hash, readRecord, recordName, sameInput, type AttemptRecord } from './record.js';
import { resolveStorage, webStorage, type StorageSpec } from './storage.js';
import type { LiveHandlers, LiveOptions } from './stream.js';
import { chargeCardDocument, chargeStatusDocument, describe, post, type Answer } from './transport.js';
import type { ChargeCardInput, ChargerState, LiveMode, Outcome, PayInput, RetryOptions } from './types.js';

export type { ChargerEnvironment } from './page.js';

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

export function createCharger(o: ChargerOptions): Charger {
  const env = o.environment ?? browser();
  const now = env.now ?? Date.now;
  const random = env.random ?? Math.random;
  const doFetch = o.fetch ?? ((...a: Parameters<typeof fetch>) => globalThis.fetch(...a));
  const config = { ...machineDefaults, retry: retryPolicy(o.retry), live: o.live ?? 'sse' };
  const headers: Record<string, string> = { ...(o.publishableKey && { Authorization: `Bearer ${o.publishableKey}` }), ...o.headers };
  const authorization = headers.Authorization ?? headers.authorization ?? '';
  const scope = o.scope ?? o.session ?? 'default';
  const name = recordName(scope, authorization);
  const id = hash(String(Math.random()) + now());
  const subscribers = new Set<(s: ChargerState) => void>();
  const listeners = new Set<(e: ChargerEvent) => void>();
  const waiters = new Set<Waiter>();
  const stopAll = new AbortController();
  let current = initialState;
  let inflight: { input: ChargeCardInput; promise: Promise<Outcome> } | null = null;
  let chain: Promise<unknown> = Promise.resolve();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let wire = 0;
  let question = 0;
  let stream: { stop?: () => void } | null = null;
  let closed = false;

  const emit = (e: ChargerEvent) => {
    for (const fn of [...listeners]) {
      try {
        fn(e);
      } catch {
        // a listener's bug is not the attempt's
      }
    }
  };
  // Heard by on() listeners added right after createCharger, too.
  const later = (e: ChargerEvent) => queueMicrotask(() => emit(e));
  if (o.onEvent) listeners.add(o.onEvent);
  const storage = resolveStorage(o.storage, (reason) => later({ type: 'storage-fallback', reason }));
  const load = () => readRecord(storage.get(name), now());

  const clearTimer = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  const stopStream = () => {
    const s = stream;
    stream = null;
    s?.stop?.();
  };

  /** Dispatches e (remade with a freshly minted key, if step starts a new attempt) and answers caller. */
  function dispatch(e: MachineEvent, caller?: Waiter, remake?: (key: string) => MachineEvent): void {
    if (closed) return;
    const prev = current;
    let { state, effects } = step(prev, e, config);
    if (remake && state.key === '') ({ state, effects } = step(prev, remake(o.mintKey ? o.mintKey() : uuid()), config));
    current = state;
    let answered = false;
    for (const fx of effects) {
      switch (fx.type) {
        case 'Reply':
        case 'Settle':
          if (caller && !answered) settle(caller, fx.result);
          answered = true;
          if (fx.type === 'Settle') {
            const ws = [...waiters];
            waiters.clear();
            for (const w of ws) settle(w, fx.result);
          }
          break;
        case 'Persist': {
          const r: AttemptRecord = fx.record;
          const old = load();
          const createdAt = r.createdAt || (old?.key === r.key && old.createdAt) || now();
          storage.set(name, JSON.stringify({ ...r, scope, createdAt }));
          break;
        }
        case 'Forget':
          storage.remove(name);
          break;
        case 'Send': {
          const { key, attempt, input } = fx;
          const token = ++wire;
          emit({ type: 'send', key, attempt, operation: 'chargeCard' });
          request('ChargeCard', chargeCardDocument, 'chargeCard', { idempotencyKey: key, input }, () => token === wire, 'Answered');
          break;
        }
        case 'AskStatus': {
          const token = ++question;
          emit({ type: 'send', key: fx.key, attempt: current.attempt ?? 0, operation: 'chargeStatus' });
          request('ChargeStatus', chargeStatusDocument, 'chargeStatus', variables(fx.key), () => token === question, 'StatusAnswered');
          break;
        }
        case 'Subscribe':
          follow(fx.key, fx.mode);
          break;
        case 'Unsubscribe':
          stopStream();
          break;
        case 'SetTimer':
          clearTimer();
          timer = setTimeout(() => dispatch({ type: 'TimerFired', now: now() }), fx.ms);
          break;
        case 'ClearTimer':
          clearTimer();
          break;
        case 'Broadcast':
          cross?.tab.post({ from: id, kind: 'progress', progress: fx.progress });
          break;
        case 'Emit':
          emit(fx.event);
      }
    }
    if (caller && !answered) waiters.add(caller);
    if (cross && !closed) {
      cross.sync(state, waiters.size > 0, () => {
        const leader = (key: string): MachineEvent => ({ type: 'Leader', key, record: load(), now: now() });
        dispatch(leader(''), undefined, leader);
      });
    }
    if (state !== prev) for (const fn of [...subscribers]) fn(state);
  }

  /** The attempt's key, and the session it pays, for chargeStatus and chargeUpdated. */
  function variables(idempotencyKey: string): { idempotencyKey: string; checkoutSession?: string } {
    const checkoutSession = current.input?.checkoutSession ?? o.session;
    return checkoutSession ? { idempotencyKey, checkoutSession } : { idempotencyKey };
  }

  function request(
    operationName: string,
    query: string,
    field: 'chargeCard' | 'chargeStatus',
    vars: Record<string, unknown>,
    latest: () => boolean,
    type: 'Answered' | 'StatusAnswered',
  ): void {
    const key = vars.idempotencyKey as string;
    void post({ operationName, query, variables: vars }, field, {
      fetch: doFetch,
      endpoint: o.endpoint,
      headers,
      signal: stopAll.signal,
      timeoutMs: o.requestTimeoutMs ?? requestTimeoutMsDefault,
      now,
    }).then((a: Answer) => {
      if (closed || !latest()) return;
      const p = a.kind === 'payload' ? a.payload : undefined;
      emit({
        type: 'answer',
        key,
        operation: field,
        ...(a.http !== undefined && { http: a.http }),
        ...(a.kind === 'payload' && { status: p?.status ?? null, ...(p && { replayed: p.replayed }) }),
        ...(a.kind === 'error' && { code: a.error.code }),
        ...(a.kind === 'lost' && { reason: a.reason }),
      });
      dispatch({ type, answer: a, now: now(), jitter: random() });
    });
  }

  function follow(key: string, mode: 'sse' | 'ws'): void {
    stopStream();
    const mine = { stop: undefined as (() => void) | undefined };
    let opened = false;
    const live = () => !closed && stream === mine;
    const handlers: LiveHandlers = {
      next(payload) {
        if (!live()) return;
        if (!opened) emit({ type: 'live-open', key, mode });
        opened = true;
        dispatch({ type: 'LiveNext', payload, now: now() });
      },
      failed(reason) {
        if (!live()) return;
        stream = null;
        emit({ type: 'live-failed', key, mode, reason });
        dispatch({ type: 'LiveFailed', reason, now: now() });
      },
    };
    stream = mine;
    const options: LiveOptions = { fetch: doFetch, endpoint: o.endpoint, headers, authorization, variables: variables(key) };
    if (o.wsEndpoint) options.wsEndpoint = o.wsEndpoint;
    if (env.WebSocket) options.WebSocket = env.WebSocket;
    mine.stop = openLive(mode, options, handlers);
  }

  function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        reject(new AbortError(current.key));
        dispatch({ type: 'Abort' });
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const done = () => signal.removeEventListener('abort', onAbort);
      p.then(
        (v) => (done(), resolve(v)),
        (err: unknown) => (done(), reject(err)),
      );
    });
  }

  /**
   * Runs fn after the calls before it have taken the lock and been
   * dispatched (not after their outcomes), then waits for the outcome of
   * the event it makes (with a fresh key, if step asks for one).
   */
  function enqueue(make: (leader: boolean) => (key: string) => MachineEvent): Promise<Outcome | null> {
    if (closed) return refuseClosed();
    const run = chain.then(async () => {
      const remake = make(cross ? await cross.lead(current) : true);
      return {
        wait: new Promise<Outcome | null>((resolve, reject) => {
          if (closed) return reject(new AbortError(current.key));
          dispatch(remake(''), { resolve, reject }, remake);
        }),
      };
    });
    chain = run.catch(() => {});
    return run.then((r) => r.wait);
  }

  // The other tabs: only in a page, and unless crossTab is false.
  let cross: Tabs | null = null;
  if (o.crossTab !== false) {
    const local = () => webStorage('localStorage').storage;
    const shared = env.shared !== undefined ? env.shared : !storage.shared ? local() : o.storage === 'local' ? local() : null;
    cross = tabs('chargeonce:' + name.slice(name.lastIndexOf(':') + 1), id, { ...env, shared, now }, (m) => {
      const s = current;
      if (m.kind === 'query') {
        if (!s.remote && s.key && s.kind !== 'idle') cross?.tab.post({ from: id, kind: 'progress', progress: progressOf(s) });
        return;
      }
      if (m.progress.key && (s.remote || s.kind === 'idle')) emit({ type: 'remote', key: m.progress.key, kind: m.progress.kind });
      dispatch({ type: 'RemoteProgress', progress: m.progress, now: now() });
    });
    const { locks, channel } = cross.tab;
    if (locks !== 'web-locks' || channel !== 'broadcast-channel') later({ type: 'crosstab', locks, channel });
  }
  const unlisten = listen(env, now, (e) => dispatch(e));

  return {
    get state() {
      return current;
    },
    subscribe(fn) {
      subscribers.add(fn);
      return () => void subscribers.delete(fn);
    },
    on(_type, fn) {
      listeners.add(fn);
      return () => void listeners.delete(fn);
    },
    pay(input, options = {}) {
      const full: ChargeCardInput = { ...input };
      if (o.session && !full.checkoutSession) full.checkoutSession = o.session;
      if (closed) return refuseClosed();
      if (options.signal?.aborted) return Promise.reject(new AbortError(current.key));
      let promise = inflight && sameInput(inflight.input, full) ? inflight.promise : null; // a double click: the same promise
      if (!promise) {
        const p = enqueue((leader) => (key) => ({ type: 'Pay', input: full, key, record: load(), leader, now: now() })) as Promise<Outcome>;
        const entry = { input: full, promise: p };
        inflight ??= entry;
        const clear = () => {
          if (inflight === entry) inflight = null;
        };
        p.then(clear, clear);
        promise = p;
      }
      return options.signal ? abortable(promise, options.signal) : promise;
    },
    resume() {
      return enqueue((leader) => () => ({ type: 'Resume', record: load(), leader, now: now() }));
    },
    reset() {
      let refused: Error | undefined;
      dispatch({ type: 'Reset' }, { resolve() {}, reject: (e) => (refused = e) });
      if (refused) throw refused;
      inflight = null;
    },
    close() {
      if (closed) return;
      closed = true;
      clearTimer();
      stopStream();
      stopAll.abort();
      unlisten();
      cross?.close();
      for (const w of waiters) w.reject(new AbortError(current.key));
      waiters.clear();
    },
  };
}

const refuseClosed = () => Promise.reject(new ChargerStateError('closed', 'the charger is closed'));

function settle(w: Waiter, r: Result): void {
  if ('ok' in r) return w.resolve(r.ok);
  const e = r.error;
  w.reject(
    e.type === 'rejected'
      ? new ChargeRejectedError(e.key, e.error.code, e.error.message, e.error.field)
      : e.type === 'unknown'
        ? new UnknownOutcomeError(e.key, e.expiresAt)
        : e.type === 'open'
          ? new AttemptOpenError(e.key)
          : new ChargerStateError(e.state, e.message),
  );
}

/**
 * Opens the live stream, loading its code first: most checkouts never see
 * PROCESSING, so neither transport is in the core. A stop before it loaded
 * opens nothing.
 */
function openLive(mode: 'sse' | 'ws', o: LiveOptions, h: LiveHandlers): () => void {
  let stop: (() => void) | undefined;
  let stopped = false;
  (mode === 'ws' ? import('./ws.js') : import('./sse.js')).then(
    (m) => {
      if (!stopped) stop = m.open(o, h);
    },
    (err: unknown) => {
      if (!stopped) h.failed(describe(err));
    },
  );
  return () => {
    stopped = true;
    stop?.();
  };
}

/** A UUID v4: crypto.randomUUID where the page is a secure context, else from getRandomValues. */
export function uuid(): string {
  const c = globalThis.crypto;
  if (c.randomUUID) return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 15) | 64;
  b[8] = (b[8]! & 63) | 128;
  const h = [...b].map((x) => (x | 256).toString(16).slice(1)).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

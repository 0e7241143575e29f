// The runner: createCharger() keeps a state, feeds every happening to
// step() as an event, and performs the effects it returns with fetch,
// timers, storage, the live stream, the sender lock and the tabs' channel.
// Everything that decides lives in machine.ts; this file only does. What
// only a page needs (crosstab.ts, wake.ts) and the live transports load
// with import(), outside the core.
import { retryPolicy } from './backoff.js';
import { abortable, AbortError, ChargerStateError, settle, type Waiter } from './errors.js';
import type { ChargerEvent } from './events.js';
import { initialState, machineDefaults, step } from './machine.js';
import type { MachineEvent } from './machine-types.js';
import type { Joined } from './crosstab-types.js';
import { browser } from './page.js';
import { openLive } from './live.js';
import { hash, readRecord, recordName, sameInput, uuid, type AttemptRecord } from './record.js';
import { inputOf, keyOf } from './steps.js';
import { resolveStorage } from './storage.js';
import type { LiveOptions } from './stream.js';
import { chargeOperation } from './charge-operation.js';
import { answerEvent, requestTimeoutMsDefault, type Answer } from './transport.js';
import type { ChargeCardInput, ChargerState, Outcome } from './types.js';
import type { Charger, ChargerOptions } from './api.js';

export type { Charger, ChargerEnvironment, ChargerOptions, PayOptions } from './api.js';

/** The query parameter the provider's redirect back to the returnUrl carries: the attempt's idempotency key. */
export const returnKeyParam = 'chargeonce_key';

export function createCharger(o: ChargerOptions): Charger {
  const env = o.environment ?? browser();
  const now = env.now ?? Date.now;
  const random = env.random ?? Math.random;
  const doFetch = o.fetch ?? ((...a: Parameters<typeof fetch>) => globalThis.fetch(...a));
  const config = { ...machineDefaults, retry: retryPolicy(o.retry), live: o.live ?? 'sse' };
  const headers: Record<string, string> = { ...(o.publishableKey && { Authorization: `Bearer ${o.publishableKey}` }), ...o.headers, ...traceHeaders(o) };
  const authorization = headers.Authorization ?? headers.authorization ?? '';
  const scope = o.scope ?? o.session ?? 'default';
  const name = recordName(scope, authorization);
  const id = hash(String(Math.random()) + now());
  const subscribers = new Set<(s: ChargerState) => void>();
  const listeners = new Set<(e: ChargerEvent) => void>();
  const waiters = new Set<Waiter>();
  const stopAll = new AbortController();
  // What charging sends and how it is asked about: the same operation the runner drives for a merchant's server.
  const charge = chargeOperation(
    { fetch: doFetch, endpoint: o.endpoint, headers, signal: stopAll.signal, timeoutMs: o.requestTimeoutMs ?? requestTimeoutMsDefault, now },
    () => inputOf(current)?.checkoutSession ?? o.session,
  );
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
    if (remake && keyOf(state) === '') ({ state, effects } = step(prev, remake(o.mintKey ? o.mintKey() : uuid()), config));
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
          const { key, input } = fx;
          const token = ++wire;
          emit({ type: 'send', key, try: fx.try, operation: 'chargeCard' });
          request(key, 'chargeCard', charge.send(key, input), () => token === wire, 'Answered');
          break;
        }
        case 'AskStatus': {
          const token = ++question;
          emit({ type: 'send', key: fx.key, try: current.kind === 'idle' ? 0 : current.attempt.sends, operation: 'chargeStatus' });
          request(fx.key, 'chargeStatus', charge.status(fx.key), () => token === question, 'StatusAnswered');
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
          cross?.tell(fx.progress);
          break;
        case 'Navigate':
          (env.navigate ?? ((url) => globalThis.location.assign(url)))(fx.url);
          break;
        case 'Emit':
          emit(fx.event);
      }
    }
    if (caller && !answered) waiters.add(caller);
    if (cross && !closed) cross.sync(state, waiters.size > 0);
    if (state !== prev) for (const fn of [...subscribers]) fn(state);
  }

  /** chargeonce_key in the page's address: this page is the return from the bank. */
  function returnKey(): string | undefined {
    const search = env.location?.search ?? globalThis.location?.search;
    return (search && new URLSearchParams(search).get(returnKeyParam)) || undefined;
  }

  /** The attempt's key, and the session it pays, for chargeStatus and chargeUpdated. */
  function variables(idempotencyKey: string): { idempotencyKey: string; checkoutSession?: string } {
    const checkoutSession = inputOf(current)?.checkoutSession ?? o.session;
    return checkoutSession ? { idempotencyKey, checkoutSession } : { idempotencyKey };
  }

  /** When the request of key (field) answers: its answer event, and the event that moves the state if it is still the latest. */
  function request(key: string, field: 'chargeCard' | 'chargeStatus', answered: Promise<Answer>, latest: () => boolean, type: 'Answered' | 'StatusAnswered'): void {
    void answered.then((a) => {
      if (closed) return;
      // Every send has its answer event; only the latest request's answer moves the state.
      emit(answerEvent(key, field, a));
      if (latest()) dispatch({ type, answer: a, now: now(), jitter: random() });
    });
  }

  function follow(key: string, mode: 'sse' | 'ws'): void {
    stopStream();
    const mine: { stop?: () => void } = {};
    stream = mine;
    const options: LiveOptions = { fetch: doFetch, endpoint: o.endpoint, headers, authorization, variables: variables(key) };
    if (o.wsEndpoint) options.wsEndpoint = o.wsEndpoint;
    if (env.WebSocket) options.WebSocket = env.WebSocket;
    mine.stop = openLive(key, mode, options, {
      current: () => !closed && stream === mine,
      ended: () => void (stream = null),
      emit,
      dispatch: (e) => dispatch(e),
      now,
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
      await joined;
      const remake = make(cross ? await cross.lead(current) : true);
      return {
        wait: new Promise<Outcome | null>((resolve, reject) => {
          if (closed) return reject(new AbortError(keyOf(current)));
          dispatch(remake(''), { resolve, reject }, remake);
        }),
      };
    });
    chain = run.catch(() => {});
    return run.then((r) => r.wait);
  }

  // The other tabs: only in a page, and unless crossTab is false. Their code
  // loads apart, right away; pay() and resume() wait for it. A page without
  // Web Locks and BroadcastChannel (outside a secure context, or an old
  // browser) hears that once, and sends alone.
  let cross: Joined | null = null;
  let joined: Promise<unknown> = Promise.resolve();
  if (o.crossTab !== false && (env.locks || env.BroadcastChannel)) {
    const member = { id, state: () => current, record: load, emit, dispatch: (e: MachineEvent, remake?: (key: string) => MachineEvent) => dispatch(e, undefined, remake) };
    const scopeName = 'chargeonce:' + name.slice(name.lastIndexOf(':') + 1);
    joined = import('./crosstab.js').then(
      (m) => {
        if (!closed) cross = m.join(scopeName, { ...env, now }, member);
      },
      // Unloadable (the network): this tab sends alone, as without the APIs.
      () => later({ type: 'crosstab', locks: 'none', channel: 'none' }),
    );
  } else if (o.crossTab !== false && env.addEventListener) {
    later({ type: 'crosstab', locks: 'none', channel: 'none' });
  }
  // The page's online, offline and visibility events: loaded apart, too.
  let unlisten = () => {};
  if (env.addEventListener) {
    const heard = import('./wake.js').then(
      (m) => {
        if (!closed) unlisten = m.listen(env, now, (e) => dispatch(e));
      },
      () => {}, // unloadable: the attempt still ends, only without pausing
    );
    joined = Promise.all([joined, heard]);
  }

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
      if (options.signal?.aborted) return Promise.reject(new AbortError(keyOf(current)));
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
      return options.signal
        ? abortable(promise, options.signal, () => {
            dispatch({ type: 'Abort' });
            return new AbortError(keyOf(current));
          })
        : promise;
    },
    resume() {
      const back = returnKey(); // now: the page may drop it from the address right after this call
      return enqueue((leader) => () => ({ type: 'Resume', record: load(), returnKey: back, leader, now: now() }));
    },
    reset() {
      let refused: Error | undefined;
      dispatch({ type: 'Reset' }, { resolve() {}, reject: (e) => (refused = e) });
      if (refused) throw refused;
      inflight = null;
    },
    handleNextAction() {
      if (closed) throw closedError();
      let refused: Error | undefined;
      dispatch({ type: 'HandleNextAction', record: load() }, { resolve() {}, reject: (e) => (refused = e) });
      if (refused) throw refused;
    },
    close() {
      if (closed) return;
      closed = true;
      clearTimer();
      stopStream();
      stopAll.abort();
      unlisten();
      cross?.close();
      for (const w of waiters) w.reject(new AbortError(keyOf(current)));
      waiters.clear();
    },
  };
}

/** W3C traceparent: version 00, a trace id and a parent id not all zeros, and the flags. */
const traceparentPattern = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The trace context headers o asks for; a malformed traceparent is refused before anything is sent. */
function traceHeaders(o: ChargerOptions): Record<string, string> {
  if (o.traceparent === undefined) return {};
  if (!traceparentPattern.test(o.traceparent)) {
    throw new TypeError(`traceparent ${JSON.stringify(o.traceparent)} is not a W3C trace context (00-<32 hex>-<16 hex>-<2 hex>, lower case)`);
  }
  return { traceparent: o.traceparent, ...(o.tracestate && { tracestate: o.tracestate }) };
}

const closedError = () => new ChargerStateError('closed', 'the charger is closed');
const refuseClosed = () => Promise.reject(closedError());

// What the end-to-end tests do in and around the shop's page: create a
// charger in the page, pay, resume, read the charger's event and state logs,
// and record every request the page sends to chargeonce, with the operation
// and the idempotency key it carries.
import type { Page, Request } from 'playwright';
import { expect } from 'vitest';

/** The options of createCharger that can cross into the page (onEvent is added there). */
export interface ChargerOptions {
  endpoint: string;
  publishableKey: string;
  session: string;
  storage: 'session' | 'local';
  live: 'sse' | 'ws' | 'poll';
  crossTab?: boolean;
  traceparent?: string;
  tracestate?: string;
}

export interface PayInput {
  paymentMethod: string;
}

export interface Outcome {
  status: 'SUCCEEDED' | 'FAILED';
  key: string;
  replayed?: boolean;
  charge?: { id: string; amount: number };
  failure?: { code: string; message: string };
}

/** What a call in the page ended with: its value, or the error it threw. */
export type Settled<T> = { value: T } | { error: string };

/** One onEvent call, made plain (errors as name and message) and stamped with Date.now(). */
export type LoggedEvent = Record<string, unknown> & { at: number };
/** One state the charger's subscribers were given. */
export interface LoggedState {
  at: number;
  kind: string;
  key: string | null;
  /** The charger's paused flag (offline, or hidden while retrying or polling). */
  paused: boolean;
}

/** The test page's globals: the library's export, the charger, its logs and a pending pay. */
interface TestWindow {
  createCharger: (options: Record<string, unknown>) => {
    pay(input: PayInput): Promise<Outcome>;
    resume(): Promise<Outcome | null>;
    subscribe(listener: (state: { kind: string; attempt?: { key: string }; paused: boolean }) => void): unknown;
  };
  charger: ReturnType<TestWindow['createCharger']>;
  chargerLog: { events: LoggedEvent[]; states: LoggedState[] };
  pending?: Promise<Settled<Outcome>>;
}

/**
 * Waits for the library to load, then creates the page's charger with
 * options, logging its events and states in the page.
 */
export async function mount(page: Page, options: ChargerOptions): Promise<void> {
  await page.waitForFunction(() => typeof (window as unknown as TestWindow).createCharger === 'function', undefined, { timeout: 10_000 });
  await page.evaluate((options) => {
    const w = window as unknown as TestWindow;
    // An event crosses to the test as JSON: an Error becomes its name and message.
    const plain = (v: unknown): unknown =>
      JSON.parse(JSON.stringify(v, (_k, x: unknown) => (x instanceof Error ? { name: x.name, message: x.message } : x)) ?? 'null');
    const log: TestWindow['chargerLog'] = { events: [], states: [] };
    w.chargerLog = log;
    w.charger = w.createCharger({
      ...options,
      onEvent: (e: unknown) => log.events.push({ at: Date.now(), ...(plain(e) as Record<string, unknown>) }),
    });
    w.charger.subscribe((s) => log.states.push({ at: Date.now(), kind: s.kind, key: s.attempt?.key ?? null, paused: s.paused }));
  }, options);
}

/** Starts charger.pay(input) in the page, at the page's clock time `at` when given; settle() awaits it. */
export async function startPay(page: Page, input: PayInput, at?: number): Promise<void> {
  await page.evaluate(
    ({ input, at }) => {
      const w = window as unknown as TestWindow;
      const wait = at === undefined ? Promise.resolve() : new Promise((ok) => setTimeout(ok, Math.max(0, at - Date.now())));
      w.pending = wait
        .then(() => w.charger.pay(input))
        .then(
          (value) => ({ value: JSON.parse(JSON.stringify(value)) as Outcome }),
          (e: unknown) => ({ error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) }),
        );
    },
    { input, at },
  );
}

/** The outcome of the pay that startPay started. */
export async function settle(page: Page): Promise<Settled<Outcome>> {
  return page.evaluate(() => (window as unknown as TestWindow).pending!);
}

/** charger.pay(input), to its end. */
export async function pay(page: Page, input: PayInput): Promise<Settled<Outcome>> {
  await startPay(page, input);
  return settle(page);
}

/** Two charger.pay(input) calls in the same tick, as a double click makes them. */
export async function payTwiceAtOnce(page: Page, input: PayInput): Promise<Settled<Outcome>[]> {
  return page.evaluate(async (input) => {
    const w = window as unknown as TestWindow;
    const one = () =>
      w.charger.pay(input).then(
        (value) => ({ value: JSON.parse(JSON.stringify(value)) as Outcome }),
        (e: unknown) => ({ error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) }),
      );
    return Promise.all([one(), one()]);
  }, input);
}

/** charger.resume(), to its end. */
export async function resume(page: Page): Promise<Settled<Outcome | null>> {
  return page.evaluate(() =>
    (window as unknown as TestWindow).charger.resume().then(
      (value) => ({ value: value === null ? null : (JSON.parse(JSON.stringify(value)) as Outcome) }),
      (e: unknown) => ({ error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) }),
    ),
  );
}

export async function chargerLog(page: Page): Promise<TestWindow['chargerLog']> {
  return page.evaluate(() => (window as unknown as TestWindow).chargerLog);
}

/** Waits until the charger has been in state kind (and paused, when asked); false if it was not within timeout. */
export async function reachedState(page: Page, kind: string, timeout: number, paused = false): Promise<boolean> {
  return page
    .waitForFunction(
      ({ kind, paused }) => (window as unknown as TestWindow).chargerLog.states.some((s) => s.kind === kind && (!paused || s.paused)),
      { kind, paused },
      { timeout, polling: 50 },
    )
    .then(
      () => true,
      () => false,
    );
}

/** The value of a call in the page, failing the test with the error it threw. */
export function valueOf<T>(settled: Settled<T>): T {
  if ('error' in settled) expect.fail(`the call in the page threw: ${settled.error}`);
  return settled.value;
}

/** A GraphQL request the page sent to chargeonce. */
export interface Send {
  operation: 'chargeCard' | 'chargeStatus' | 'chargeUpdated' | 'other';
  key: string | null;
  /** Date.now() in Node when Chromium reported the request. */
  at: number;
  transport: 'http' | 'ws';
  request?: Request;
  /** How it ended: see ended(). */
  ending: Promise<Ending>;
}

/** How a request ended: the HTTP status of its answer, and why it failed (no answer, or a cut one). */
export interface Ending {
  status?: number;
  failure?: string;
  /** Still open (an event stream) when asked; a websocket subscription is always that. */
  open?: boolean;
}

/** The sends with how each ended; one still open after waitMs counts as open. */
export async function ended(sends: Send[], waitMs = 2_000): Promise<(Send & Ending)[]> {
  const open = new Promise<Ending>((ok) => setTimeout(() => ok({ open: true }), waitMs));
  return Promise.all(sends.map(async (s) => ({ ...s, ...(await Promise.race([s.ending, open])) })));
}

interface GraphQLBody {
  query?: string;
  variables?: Record<string, unknown>;
  operationName?: string;
}

const operations = ['chargeCard', 'chargeStatus', 'chargeUpdated'] as const;

/** The root field a document runs, among chargeonce's three for a browser. */
export function operationOf(body: GraphQLBody): Send['operation'] {
  const query = body.query ?? '';
  return operations.find((op) => new RegExp(`\\b${op}\\s*\\(`).test(query)) ?? 'other';
}

/** The idempotency key a request carries: its variable (by the name the document gives it) or its header. */
export function keyOf(body: GraphQLBody, headers: Record<string, string> = {}): string | null {
  const vars = body.variables ?? {};
  const m = /\b(?:chargeCard|chargeStatus|chargeUpdated)\s*\(\s*[^)]*?idempotencyKey\s*:\s*(?:\$(\w+)|"([^"]*)")/.exec(body.query ?? '');
  if (m?.[2] !== undefined) return m[2];
  const named = m?.[1] ? vars[m[1]] : vars.idempotencyKey;
  if (typeof named === 'string') return named;
  const header = headers['idempotency-key'];
  return header ? header.replace(/^"(.*)"$/, '$1') : null;
}

function parse(text: string | null | undefined): GraphQLBody | null {
  if (!text) return null;
  try {
    return JSON.parse(text) as GraphQLBody;
  } catch {
    return null;
  }
}

/**
 * Records the page's requests to chargeonce's endpoint from now on: POSTs
 * and GETs (event streams) with the operation and key of their document,
 * and the subscriptions it starts over a websocket. Follows reloads.
 */
export function recordSends(page: Page, endpoint: string): Send[] {
  const sends: Send[] = [];
  const endings = new Map<Request, (e: Ending) => void>();
  const path = new URL(endpoint);
  const isEndpoint = (url: string) => {
    const u = new URL(url);
    return u.origin === path.origin && u.pathname === path.pathname;
  };
  page.on('request', (r) => {
    if (!isEndpoint(r.url()) || !['POST', 'GET'].includes(r.method())) return;
    let body = r.method() === 'POST' ? parse(r.postData()) : null;
    if (r.method() === 'GET') {
      const q = new URL(r.url()).searchParams;
      body = { query: q.get('query') ?? '', variables: parse(q.get('variables')) as Record<string, unknown> | undefined };
    }
    if (!body) return;
    const ending = new Promise<Ending>((ok) => endings.set(r, ok));
    sends.push({ operation: operationOf(body), key: keyOf(body, r.headers()), at: Date.now(), transport: 'http', request: r, ending });
  });
  // Chromium's own word on how each ended: a cut body fails the request
  // after its response arrived.
  page.on('requestfinished', async (r) => {
    endings.get(r)?.({ status: (await r.response())?.status() });
  });
  page.on('requestfailed', async (r) => {
    const res = await r.response().catch(() => null);
    endings.get(r)?.({ status: res?.status(), failure: r.failure()?.errorText ?? 'failed' });
  });
  page.on('websocket', (ws) => {
    if (!isEndpoint(ws.url().replace(/^ws/, 'http'))) return;
    ws.on('framesent', (f) => {
      const msg = parse(String(f.payload)) as { type?: string; payload?: GraphQLBody } | null;
      if (msg?.type !== 'subscribe' || !msg.payload) return;
      sends.push({ operation: operationOf(msg.payload), key: keyOf(msg.payload), at: Date.now(), transport: 'ws', ending: Promise.resolve({ open: true }) });
    });
  });
  return sends;
}

export const only = <S extends Send>(sends: S[], operation: Send['operation']) => sends.filter((s) => s.operation === operation);

/** The distinct keys of the sends. */
export const keysOf = (sends: Send[]) => [...new Set(sends.map((s) => s.key))];

/** When Chromium started the request, by its own clock (ms since the epoch); Node's time when unknown. */
export function startedAt(send: Send): number {
  const t = send.request?.timing().startTime ?? -1;
  return t > 0 ? t : send.at;
}

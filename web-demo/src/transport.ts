// The fetch the page hands the charger (its `fetch` option) and uses for its
// own requests: it records every request the page sends, for the timeline,
// and adds the development fault header to the request that the "lose the
// next response" switch picks. The charger's retries, keys and live status
// are the library's; this wrapper only watches them go by. The acts of
// the shop's backend on the charge (a refund, a capture, a void: desk.ts)
// go through it too, to the backend rather than to chargeonce: each row is
// the mutation the backend makes (refundCharge, captureCharge, voidCharge),
// under the page's id for the act.
import { backendActs, refundAct } from './backend';
import type { ActStatus } from './desk';
import type { ChargeStatus } from './generated/graphql';

/** The request header that asks the development server for a fault. */
export const faultHeader = 'X-Chargeonce-Fault';
export const dropResponse = 'drop-response';

/** The operation of a refund's row: the shop's backend is asked, and it asks chargeonce's refundCharge. */
export const refundOperation = refundAct.operation;

export type Outcome =
  | 'pending' // sent, no answer yet
  | 'network-error' // no usable answer: the outcome is unknown
  | 'answered' // a GraphQL answer with data
  | 'graphql-error' // a GraphQL answer with errors, or the shop's backend's refusal (it carries the API's code)
  | 'abandoned' // the page went away before the answer
  | 'unavailable' // a live status subscription that failed: the page polls instead
  | 'closed' // a live status subscription the page ended: the outcome came another way
  | 'navigated' // a step, not a request: the page went to the bank's page (nextAction)
  | 'returned'; // a step, not a request: the page is back from the bank (detail: where it found the attempt)

export interface RequestRecord {
  /** 1 for the first request of the checkout attempt, 2 for the next… */
  n: number;
  operation: string;
  idempotencyKey: string;
  /** The client secret of the checkout session the request was about, if it named one. */
  checkoutSession?: string;
  sentAt: string;
  fault?: string;
  outcome: Outcome;
  httpStatus?: number;
  /** From the answer: null when chargeStatus knows no such key. */
  status?: ChargeStatus | ActStatus | null;
  replayed?: boolean;
  /** From a PROCESSING answer: the type of its nextAction (REDIRECT: the shopper must authenticate). */
  nextAction?: string;
  /** The error's message, or its code. */
  detail?: string;
  /** A GraphQL error's extensions.retryAfterMs (SERVICE_UNAVAILABLE, RATE_LIMITED). */
  retryAfterMs?: number;
}

export interface TransportHooks {
  /** The fault to ask for on this request, if any. */
  faultFor(operation: string): string | null;
  /** A request was sent; returns its record, which update later changes. */
  sent(r: Omit<RequestRecord, 'n'>): RequestRecord;
  update(r: RequestRecord): void;
}

interface GraphQLBody {
  operationName?: string;
  variables?: { idempotencyKey?: unknown; checkoutSession?: unknown; input?: { checkoutSession?: unknown } };
  /** An act's body (desk.ts): its key is the page's id for the act, in the act's idField. */
  [idField: string]: unknown;
}

interface Payload {
  status?: ChargeStatus | ActStatus;
  replayed?: boolean;
  nextAction?: { type?: string } | null;
}

interface GraphQLAnswer {
  data?: Record<string, Payload | null> | null;
  errors?: { message: string; extensions?: { code?: string; retryAfterMs?: unknown } }[];
}

/**
 * A fetch for the GraphQL client that records each request through hooks.
 * It reads the whole body before it hands the response on, so that a
 * response cut short is seen here, and reported to the client, as the
 * network error it is.
 */
export function recordingFetch(hooks: TransportHooks, base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const body = parseBody(init?.body);
    const path = pathOf(input);
    const act = backendActs.find((a) => a.path === path);
    const operation = act ? act.operation : (body.operationName ?? 'unknown');
    const rawKey = act ? body[act.idField] : body.variables?.idempotencyKey;
    const key = typeof rawKey === 'string' ? rawKey : '';
    const session = body.variables?.input?.checkoutSession ?? body.variables?.checkoutSession;
    const headers = new Headers(init?.headers);
    const fault = hooks.faultFor(operation);
    if (fault) headers.set(faultHeader, fault);

    const rec = hooks.sent({
      operation,
      idempotencyKey: key,
      ...(typeof session === 'string' ? { checkoutSession: session } : {}),
      sentAt: new Date().toISOString(),
      outcome: 'pending',
      ...(fault ? { fault } : {}),
    });
    let res: Response;
    let text: string;
    try {
      res = await base(input, { ...init, headers });
      text = await res.text();
    } catch (err) {
      if (isAbort(err)) {
        hooks.update({ ...rec, outcome: 'abandoned' });
      } else {
        hooks.update({ ...rec, outcome: 'network-error', detail: errorMessage(err) });
      }
      throw err;
    }
    hooks.update(act ? describeShopAnswer(rec, res.status, text) : describeAnswer(rec, res.status, text));
    return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

function describeAnswer(rec: RequestRecord, httpStatus: number, text: string): RequestRecord {
  let answer: GraphQLAnswer;
  try {
    answer = JSON.parse(text) as GraphQLAnswer;
  } catch {
    return { ...rec, outcome: 'network-error', httpStatus, detail: `HTTP ${httpStatus}: not a GraphQL answer` };
  }
  if (answer.errors?.length) {
    const e = answer.errors[0];
    const retryAfterMs = e.extensions?.retryAfterMs;
    return {
      ...rec,
      outcome: 'graphql-error',
      httpStatus,
      detail: e.extensions?.code ?? e.message,
      ...(typeof retryAfterMs === 'number' && retryAfterMs > 0 ? { retryAfterMs } : {}),
    };
  }
  const payload = answer.data ? Object.values(answer.data)[0] : undefined;
  if (payload === undefined) {
    return { ...rec, outcome: 'network-error', httpStatus, detail: `HTTP ${httpStatus}: no data` };
  }
  return {
    ...rec,
    outcome: 'answered',
    httpStatus,
    status: payload?.status ?? null,
    ...(payload ? { replayed: payload.replayed } : {}),
    ...(payload?.nextAction?.type ? { nextAction: payload.nextAction.type } : {}),
  };
}

/** An act's answer from the shop's backend: the mutation's payload, or {error: {code, message}}. */
function describeShopAnswer(rec: RequestRecord, httpStatus: number, text: string): RequestRecord {
  let answer: (Payload & { error?: { code?: string; message?: string } }) | null;
  try {
    answer = JSON.parse(text) as typeof answer;
  } catch {
    return { ...rec, outcome: 'network-error', httpStatus, detail: `HTTP ${httpStatus}: not an answer of the shop's backend` };
  }
  if (answer?.error) return { ...rec, outcome: 'graphql-error', httpStatus, detail: answer.error.code ?? answer.error.message ?? `HTTP ${httpStatus}` };
  if (typeof answer?.status !== 'string') return { ...rec, outcome: 'network-error', httpStatus, detail: `HTTP ${httpStatus}: no answer of the act in it` };
  return { ...rec, outcome: 'answered', httpStatus, status: answer.status, replayed: answer.replayed };
}

/** The path a request goes to, as the page names it (relative) or in full. */
function pathOf(input: RequestInfo | URL): string {
  const url = input instanceof Request ? input.url : String(input);
  return new URL(url, 'http://page.invalid').pathname;
}

function parseBody(body: BodyInit | null | undefined): GraphQLBody {
  if (typeof body !== 'string') return {};
  try {
    return JSON.parse(body) as GraphQLBody;
  } catch {
    return {};
  }
}

function isAbort(err: unknown): boolean {
  return err instanceof DOMException && err.name === 'AbortError';
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

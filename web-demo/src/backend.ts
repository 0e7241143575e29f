// The shop's backend as the page calls it: a JSON POST, whose refusals are
// {"error": {"code", "message", ...}} with the API's codes. The demo's
// backend is chargeonce's development routes (/demo/checkout-session, and
// the acts on the page's charge: /demo/refund, /demo/capture, /demo/void);
// a merchant's server answers its own page the same way.
import { retryableCodes, type Answer, type OperationPayload } from '@chargeonce/client';

/** Why the backend gave no answer: code is null when no answer arrived, or one that is not the backend's. */
export interface BackendRefusal {
  code: string | null;
  message: string;
}

/** The backend's JSON answer with its HTTP status, or why there is none. */
export type BackendAnswer = { ok: true; status: number; body: unknown } | { ok: false; error: BackendRefusal };

/**
 * An act of the shop's backend on the page's charge, which the backend
 * makes with the merchant's secret key under the page's id for it (desk.ts):
 * its route, the body's field for that id, and the API's mutation it
 * makes, which names its timeline rows.
 */
export interface BackendAct {
  path: string;
  idField: string;
  /** The API's field the backend asks for: the act's name on the timeline. */
  field: string;
  /** How the page names the act's id. */
  idName: string;
}

export const refundAct = { path: '/demo/refund', idField: 'refundId', field: 'refundCharge', idName: 'refund id' } as const;
/** Ship order: the authorization captured. */
export const captureAct = { path: '/demo/capture', idField: 'captureId', field: 'captureCharge', idName: 'capture id' } as const;
/** Cancel order: the authorization voided. */
export const voidAct = { path: '/demo/void', idField: 'voidId', field: 'voidCharge', idName: 'void id' } as const;

export const backendActs: readonly BackendAct[] = [refundAct, captureAct, voidAct];

/** The act a timeline row's operation is, if it is one. */
export const actOf = (operation: string): BackendAct | undefined => backendActs.find((a) => a.field === operation);

/** The backend's JSON answer with its HTTP status, or why there is none (no answer, or one that is not JSON). */
async function postJSON(path: string, req: unknown, base: typeof fetch): Promise<{ http: number; body: unknown } | { lost: string; http?: number }> {
  let res: Response;
  let text: string;
  try {
    res = await base(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify(req),
    });
    text = await res.text();
  } catch (err) {
    return { lost: err instanceof Error ? err.message : String(err) };
  }
  try {
    return { http: res.status, body: JSON.parse(text) };
  } catch {
    return { lost: `HTTP ${res.status}: not an answer of the shop's backend`, http: res.status };
  }
}

interface Refusal {
  code?: unknown;
  message?: unknown;
  [extension: string]: unknown;
}

/** POSTs req as JSON to the backend's path. It never throws. */
export async function postToBackend(path: string, req: unknown, base: typeof fetch): Promise<BackendAnswer> {
  const a = await postJSON(path, req, base);
  if ('lost' in a) return { ok: false, error: { code: null, message: a.lost } };
  if (a.http >= 200 && a.http < 300) return { ok: true, status: a.http, body: a.body };
  const e = (a.body as { error?: Refusal } | null)?.error;
  return { ok: false, error: { code: typeof e?.code === 'string' ? e.code : null, message: typeof e?.message === 'string' ? e.message : `HTTP ${a.http}` } };
}

/**
 * POSTs an act to the backend's path, and says what its answer means in
 * the library's words (Answer), as the operation runner reads them: the
 * act's payload (its status, replayed, retryAfterMs, failure, and what it
 * made); the backend's refusal with its code, which may be sent again when
 * the library retries that code (retryableCodes), and what remains
 * (extensions: refundable, capturable); or no answer. The backend's answer
 * is its own JSON, not GraphQL's, so this is the one place that reads it.
 * It never throws.
 */
export async function postAct<P extends OperationPayload>(path: string, req: unknown, base: typeof fetch): Promise<Answer<P>> {
  const a = await postJSON(path, req, base);
  if ('lost' in a) return { kind: 'lost', reason: a.lost, ...(a.http !== undefined ? { http: a.http } : {}) };
  const { http, body } = a;
  const { code, message, ...extensions } = (body as { error?: Refusal } | null)?.error ?? {};
  if (typeof code === 'string') {
    const error = { code, message: typeof message === 'string' ? message : `HTTP ${http}`, ...(Object.keys(extensions).length > 0 ? { extensions } : {}) };
    return { kind: 'error', error, retryable: retryableCodes.has(code), http };
  }
  if (http >= 200 && http < 300 && typeof (body as { status?: unknown } | null)?.status === 'string') return { kind: 'payload', payload: body as P, http };
  return { kind: 'lost', reason: `HTTP ${http}: no answer of the act in it`, http };
}

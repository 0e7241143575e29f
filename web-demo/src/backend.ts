// The shop's backend as the page calls it: a JSON POST, whose refusals are
// {"error": {"code", "message", ...}} with the API's codes. The demo's
// backend is chargeonce's development routes (/demo/checkout-session, and
// the acts on the page's charge: /demo/refund, /demo/capture, /demo/void);
// a merchant's server answers its own page the same way.

/** Why the backend gave no answer: code is null when no answer arrived, or one that is not the backend's. */
export interface BackendRefusal {
  code: string | null;
  message: string;
  /** What remains refundable, with REFUND_EXCEEDS_CHARGE. */
  refundable?: number;
  /** What remains capturable, with CAPTURE_EXCEEDS_AUTHORIZATION. */
  capturable?: number;
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

/** POSTs req as JSON to the backend's path. It never throws. */
export async function postToBackend(path: string, req: unknown, base: typeof fetch): Promise<BackendAnswer> {
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
    return { ok: false, error: { code: null, message: err instanceof Error ? err.message : String(err) } };
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { ok: false, error: { code: null, message: `HTTP ${res.status}: not an answer of the shop's backend` } };
  }
  if (!res.ok) {
    const e = (body as { error?: { code?: unknown; message?: unknown; refundable?: unknown; capturable?: unknown } } | null)?.error;
    return {
      ok: false,
      error: {
        code: typeof e?.code === 'string' ? e.code : null,
        message: typeof e?.message === 'string' ? e.message : `HTTP ${res.status}`,
        ...(typeof e?.refundable === 'number' ? { refundable: e.refundable } : {}),
        ...(typeof e?.capturable === 'number' ? { capturable: e.capturable } : {}),
      },
    };
  }
  return { ok: true, status: res.status, body };
}

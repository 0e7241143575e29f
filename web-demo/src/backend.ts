// The shop's backend as the page calls it: a JSON POST, whose refusals are
// {"error": {"code", "message", ...}} with the API's codes. The demo's
// backend is chargeonce's development routes (/demo/checkout-session,
// /demo/refund); a merchant's server answers its own page the same way.

/** Why the backend gave no answer: code is null when no answer arrived, or one that is not the backend's. */
export interface BackendRefusal {
  code: string | null;
  message: string;
  /** What remains refundable, with REFUND_EXCEEDS_CHARGE. */
  refundable?: number;
}

/** The backend's JSON answer with its HTTP status, or why there is none. */
export type BackendAnswer = { ok: true; status: number; body: unknown } | { ok: false; error: BackendRefusal };

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
    const e = (body as { error?: { code?: unknown; message?: unknown; refundable?: unknown } } | null)?.error;
    return {
      ok: false,
      error: {
        code: typeof e?.code === 'string' ? e.code : null,
        message: typeof e?.message === 'string' ? e.message : `HTTP ${res.status}`,
        ...(typeof e?.refundable === 'number' ? { refundable: e.refundable } : {}),
      },
    };
  }
  return { ok: true, status: res.status, body };
}

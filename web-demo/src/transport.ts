// The fetch the page hands the charger (its fetch option), and that its own
// requests and the shop's acts on the charge go through: it adds the
// development fault header to the request that the "lose the next
// response" switch picks, and says which request that was, so that its
// timeline row shows the fault. It never reads an answer: the timeline is
// drawn from the library's events (timeline.ts).
import { backendActs } from './backend';

/** The request header that asks the development server for a fault. */
export const faultHeader = 'X-Chargeonce-Fault';
export const dropResponse = 'drop-response';

/** A request as the switch sees it: the API's field it asks for (the mutation an act of the shop's backend makes), and its key. */
export interface Outgoing {
  operation: string;
  key: string;
}

export interface FaultHooks {
  /** The fault to ask for on this request, if any. */
  faultFor(r: Outgoing): string | null;
  /** The fault was asked for on r, which is on its way. */
  faulted(r: Outgoing, fault: string): void;
}

/** A fetch that asks for the fault hooks pick, on the request they pick it for. */
export function faultFetch(hooks: FaultHooks, base: typeof fetch = fetch): typeof fetch {
  return (input, init) => {
    const r = outgoing(input, init?.body);
    const fault = r && hooks.faultFor(r);
    if (!r || !fault) return base(input, init);
    const headers = new Headers(init?.headers);
    headers.set(faultHeader, fault);
    hooks.faulted(r, fault);
    return base(input, { ...init, headers });
  };
}

/** What a request is, read from its path and body: a GraphQL operation of chargeonce's, or an act of the shop's backend. */
function outgoing(input: RequestInfo | URL, body: BodyInit | null | undefined): Outgoing | null {
  let b: { operationName?: unknown; variables?: { idempotencyKey?: unknown }; [field: string]: unknown } | null;
  try {
    b = typeof body === 'string' ? JSON.parse(body) : null;
  } catch {
    return null;
  }
  if (!b || typeof b !== 'object') return null;
  const path = new URL(input instanceof Request ? input.url : String(input), 'http://page.invalid').pathname;
  const act = backendActs.find((a) => a.path === path);
  if (act) return { operation: act.field, key: String(b[act.idField] ?? '') };
  if (typeof b.operationName !== 'string') return null;
  const key = b.variables?.idempotencyKey;
  // The operation's name is its field's, capitalized (ChargeCard: chargeCard).
  return { operation: b.operationName.charAt(0).toLowerCase() + b.operationName.slice(1), key: typeof key === 'string' ? key : '' };
}

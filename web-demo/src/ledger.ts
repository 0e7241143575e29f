// The card provider's ledger for the current attempt: the charges that the
// simulated provider (served by the development server at /provider/) holds
// for the attempt's idempotency keys, and the refunds, captures and voids it
// holds of them. It is the ground truth that the page shows beside
// chargeonce's own answers: how many times the card was really charged (or
// authorized, and captured), and refunded.

export interface ProviderCharge {
  id: string;
  amount: number;
  currency: string;
  /** requires_action: waiting for the shopper to authenticate; canceled: nobody did in time. Only succeeded took money. */
  status: 'succeeded' | 'failed' | 'requires_action' | 'canceled';
  payment_method: string;
  failure_code: string | null;
  metadata: Record<string, string>;
  created: number;
  /** manual: a charge that succeeded only authorized; its captures take the money. */
  capture_method?: 'automatic' | 'manual';
  amount_captured?: number;
  /** Of a manual charge that succeeded: where its authorization stands. */
  authorization_status?: 'open' | 'captured' | 'voided' | 'expired' | null;
}

/** A capture of an authorization: only succeeded took money. */
export interface ProviderCapture {
  id: string;
  amount: number;
  currency: string;
  final: boolean;
  status: 'succeeded' | 'failed';
  charge: string;
  idempotency_key: string;
  metadata: Record<string, string>;
  created: number;
}

/** A void of an authorization: one that is held was made. */
export interface ProviderVoid {
  id: string;
  charge: string;
  idempotency_key: string;
  metadata: Record<string, string>;
  created: number;
}

export interface ProviderRefund {
  id: string;
  amount: number;
  currency: string;
  /** pending: the provider accepted it and has not settled it yet. Only succeeded gave money back. */
  status: 'pending' | 'succeeded' | 'failed';
  /** The provider's charge it refunds. */
  charge: string;
  failure_code: string | null;
  metadata: Record<string, string>;
  created: number;
}

export interface Ledger {
  charges: ProviderCharge[];
  /** Charges that took money. */
  succeeded: number;
  /** The refunds of those charges, oldest first. */
  refunds: ProviderRefund[];
  /** The captures and voids of those that only authorized, oldest first. */
  captures: ProviderCapture[];
  voids: ProviderVoid[];
}

async function list<T>(base: typeof fetch, path: string, q: URLSearchParams): Promise<T[]> {
  const res = await base(`${path}?${q}`, { headers: { Accept: 'application/json' } });
  if (!res.ok) throw new Error(`provider ledger: HTTP ${res.status}`);
  return ((await res.json()) as { data: T[] }).data;
}

/**
 * Fetches the provider's charges made for each of keys (chargeonce's
 * idempotency keys, which it passes to the provider as metadata), the
 * refunds of those that succeeded, and the captures and voids of those
 * that only authorized.
 */
export async function fetchLedger(keys: readonly string[], merchant: string, base: typeof fetch = fetch): Promise<Ledger> {
  const lists = await Promise.all(
    keys.map((key) => list<ProviderCharge>(base, '/provider/v1/charges', new URLSearchParams({ merchant, client_idempotency_key: key }))),
  );
  const byId = new Map<string, ProviderCharge>();
  for (const c of lists.flat()) byId.set(c.id, c);
  const charges = [...byId.values()].sort(byCreated);
  const paid = charges.filter((c) => c.status === 'succeeded');
  const of = <T extends { created: number; id: string }>(path: string, among: ProviderCharge[]) =>
    Promise.all(among.map((c) => list<T>(base, path, new URLSearchParams({ merchant, charge: c.id })))).then((l) => l.flat().sort(byCreated));
  const held = paid.filter((c) => c.capture_method === 'manual');
  const [refunds, captures, voids] = await Promise.all([
    of<ProviderRefund>('/provider/v1/refunds', paid),
    of<ProviderCapture>('/provider/v1/captures', held),
    of<ProviderVoid>('/provider/v1/voids', held),
  ]);
  return { charges, succeeded: paid.length, refunds, captures, voids };
}

const byCreated = (a: { created: number; id: string }, b: { created: number; id: string }): number => a.created - b.created || a.id.localeCompare(b.id);

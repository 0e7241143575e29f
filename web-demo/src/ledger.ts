// The card provider's ledger for the current attempt: the charges that the
// simulated provider (served by the development server at /provider/) holds
// for the attempt's idempotency keys, and the refunds it holds of them. It
// is the ground truth that the page shows beside chargeonce's own answers:
// how many times the card was really charged, and refunded.

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
}

async function list<T>(base: typeof fetch, path: string, q: URLSearchParams): Promise<T[]> {
  const res = await base(`${path}?${q}`, { headers: { Accept: 'application/json' } });
  if (!res.ok) throw new Error(`provider ledger: HTTP ${res.status}`);
  return ((await res.json()) as { data: T[] }).data;
}

/**
 * Fetches the provider's charges made for each of keys (chargeonce's
 * idempotency keys, which it passes to the provider as metadata), and the
 * refunds of those that took money.
 */
export async function fetchLedger(keys: readonly string[], merchant: string, base: typeof fetch = fetch): Promise<Ledger> {
  const lists = await Promise.all(
    keys.map((key) => list<ProviderCharge>(base, '/provider/v1/charges', new URLSearchParams({ merchant, client_idempotency_key: key }))),
  );
  const byId = new Map<string, ProviderCharge>();
  for (const c of lists.flat()) byId.set(c.id, c);
  const charges = [...byId.values()].sort(byCreated);
  const paid = charges.filter((c) => c.status === 'succeeded');
  const refunds = await Promise.all(
    paid.map((c) => list<ProviderRefund>(base, '/provider/v1/refunds', new URLSearchParams({ merchant, charge: c.id }))),
  );
  return { charges, succeeded: paid.length, refunds: refunds.flat().sort(byCreated) };
}

const byCreated = (a: { created: number; id: string }, b: { created: number; id: string }) => a.created - b.created || a.id.localeCompare(b.id);

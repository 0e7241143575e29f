// The card provider's ledger for the current attempt: the charges that the
// simulated provider (served by the development server at /provider/) holds
// for the attempt's idempotency keys. It is the ground truth that the page
// shows beside chargeonce's own answers: how many times the card was really
// charged.

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

export interface Ledger {
  charges: ProviderCharge[];
  /** Charges that took money. */
  succeeded: number;
}

/**
 * Fetches the provider's charges made for each of keys (chargeonce's
 * idempotency keys, which it passes to the provider as metadata).
 */
export async function fetchLedger(keys: readonly string[], merchant: string, base: typeof fetch = fetch): Promise<Ledger> {
  const lists = await Promise.all(
    keys.map(async (key) => {
      const q = new URLSearchParams({ merchant, client_idempotency_key: key });
      const res = await base(`/provider/v1/charges?${q}`, { headers: { Accept: 'application/json' } });
      if (!res.ok) throw new Error(`provider ledger: HTTP ${res.status}`);
      return ((await res.json()) as { data: ProviderCharge[] }).data;
    }),
  );
  const byId = new Map<string, ProviderCharge>();
  for (const c of lists.flat()) byId.set(c.id, c);
  const charges = [...byId.values()].sort((a, b) => a.created - b.created || a.id.localeCompare(b.id));
  return { charges, succeeded: charges.filter((c) => c.status === 'succeeded').length };
}

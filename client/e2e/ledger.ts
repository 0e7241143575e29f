// What the server says about an attempt, asked from Node as the demo
// merchant's backend would: the card simulator's ledger (its charges, and
// its refunds, captures and voids of a charge, at /provider/v1 in
// development) and chargeStatus with the merchant's secret key. Free of
// vitest, as server.ts is, since the demo's suite reads the ledger through
// it too.

export interface ProviderCharge {
  id: string;
  /** requires_action: waiting for the shopper to authenticate; canceled: nobody did in time. Only succeeded took money. */
  status: 'succeeded' | 'failed' | 'requires_action' | 'canceled';
  amount: number;
  failure_code: string | null;
  metadata: Record<string, string>;
  /** manual: a charge that succeeded only authorized; its captures take the money. */
  capture_method: 'automatic' | 'manual';
}

async function provider<T>(base: string, what: string, query: Record<string, string>): Promise<T[]> {
  const q = new URLSearchParams({ merchant: 'demo', ...query });
  const res = await fetch(`${base}/provider/v1/${what}?${q}`);
  if (res.status !== 200) throw new Error(`GET /provider/v1/${what} answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { data: T[] }).data;
}

/** The provider's charges for one of chargeonce's idempotency keys, at the server at base. */
export function ledger(key: string, base: string): Promise<ProviderCharge[]> {
  return provider<ProviderCharge>(base, 'charges', { client_idempotency_key: key });
}

/** The provider's refunds, captures or voids of one of its charges (its id, ch_…), at the server at base. */
export function ofCharge<T>(what: 'refunds' | 'captures' | 'voids', chargeId: string, base: string): Promise<T[]> {
  return provider<T>(base, what, { charge: chargeId });
}

/** Asks chargeonce about the attempt of key with the demo merchant's secret key, as its server would: chargeStatus's payload, or null. */
export async function askChargeStatus<T>(key: string, fields: string, base: string): Promise<T | null> {
  const res = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer demo-key' },
    body: JSON.stringify({ query: `query($k:String!){chargeStatus(idempotencyKey:$k){${fields}}}`, variables: { k: key } }),
  });
  const body = (await res.json()) as { data: { chargeStatus: T | null } };
  return body.data.chargeStatus;
}

/** The status chargeonce gives the attempt of key, or null when it knows none. */
export async function chargeStatus(key: string, base: string): Promise<string | null> {
  return (await askChargeStatus<{ status: string }>(key, 'status', base))?.status ?? null;
}

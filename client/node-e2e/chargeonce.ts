// What the Node tests ask the real server and its card simulator on the
// side, to check what the runner did: a charge to act on, the provider's
// refunds and captures of it, and chargeonce's own record of the charge.
import { expect, inject } from 'vitest';

export const baseURL = inject('baseURL');
export const merchant = inject('merchant');
export const secretKey = inject('secretKey');
export const skip = inject('skipReason');
export const endpoint = `${baseURL}/graphql`;

/** The development fault that runs a request to its end, then cuts its answer (devfault/). */
export const dropResponse = { 'X-Chargeonce-Fault': 'drop-response' };

async function graphql<T>(query: string, variables: Record<string, unknown>): Promise<T> {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${secretKey}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: T; errors?: unknown[] };
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return body.data as T;
}

export interface MadeCharge {
  /** The idempotency key the charge was made under. */
  key: string;
  id: string;
  providerChargeId: string;
  amount: number;
}

/** A charge of the tests' merchant, server to server with the Visa card that succeeds; MANUAL only authorizes it. */
export async function charge(captureMethod: 'AUTOMATIC' | 'MANUAL' = 'AUTOMATIC', amount = 1500): Promise<MadeCharge> {
  const key = crypto.randomUUID();
  const d = await graphql<{ chargeCard: { status: string; charge: Omit<MadeCharge, 'key'> | null } }>(
    `mutation($k: String!, $in: ChargeCardInput!) { chargeCard(idempotencyKey: $k, input: $in) { status charge { id providerChargeId amount } } }`,
    { k: key, in: { amount, currency: 'USD', paymentMethod: 'pm_card_visa', captureMethod } },
  );
  expect(d.chargeCard.status).toBe('SUCCEEDED');
  return { key, ...d.chargeCard.charge! };
}

/** What chargeonce holds of the charge made under key: its refunds and captures. */
export async function chargeRecord(key: string) {
  const d = await graphql<{ chargeStatus: { charge: { amountRefunded: number; refunds: { id: string }[]; captureStatus: string; captures: { id: string }[] } } | null }>(
    `query($k: String!) { chargeStatus(idempotencyKey: $k) { charge { amountRefunded refunds { id } captureStatus captures { id } } } }`,
    { k: key },
  );
  return d.chargeStatus?.charge ?? null;
}

/** The card provider's list of what, for one of its charges, newest first. */
export async function atProvider(what: 'refunds' | 'captures', providerChargeId: string): Promise<{ id: string; status: string; amount: number }[]> {
  const q = new URLSearchParams({ merchant, charge: providerChargeId });
  const res = await fetch(`${baseURL}/provider/v1/${what}?${q}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: { id: string; status: string; amount: number }[] }).data;
}

/**
 * fetch that loses the answer of the first n requests of operation: the
 * server runs each to its end and cuts its answer after the headers.
 */
export function losing(operation: string, n = 1): typeof fetch {
  let left = n;
  return (input, init) => {
    const body = JSON.parse(String(init?.body)) as { operationName?: string };
    if (body.operationName === operation && left > 0) {
      left--;
      return fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), ...dropResponse } });
    }
    return fetch(input, init);
  };
}

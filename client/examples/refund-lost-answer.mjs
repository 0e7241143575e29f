// Refunds a charge through @chargeonce/client/server with the first answer
// lost on the way back, and prints every request and answer: the key kept
// before the first byte, the same key sent again, the refund replayed, one
// refund at the provider. Against a development server (make run), whose
// devfault cuts the answer of a request that asks for it.
//
//   npm run build   # in client/, once
//   CHARGEONCE_URL=http://localhost:8080 CHARGEONCE_SECRET_KEY=demo-key node examples/refund-lost-answer.mjs [charge id]
//
// Without a charge id it first charges 25.00 USD with the test card
// pm_card_visa. The keys are kept in a new directory under the system's
// temporary one, or in CHARGEONCE_STORE.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMerchant, fileKeyStore } from '@chargeonce/client/server';

const base = (process.env.CHARGEONCE_URL ?? 'http://localhost:8080').replace(/\/$/, '');
const secretKey = process.env.CHARGEONCE_SECRET_KEY;
if (!secretKey) {
  console.error('CHARGEONCE_SECRET_KEY is not set (the development server\'s demo merchant has demo-key)');
  process.exit(2);
}
const endpoint = `${base}/graphql`;
const dir = process.env.CHARGEONCE_STORE ?? (await mkdtemp(join(tmpdir(), 'chargeonce-example-')));
const store = fileKeyStore(dir);
const short = (key) => `${key.slice(0, 8)}…`;

console.log(`chargeonce at ${endpoint}; keys kept in ${dir}`);
const chargeId = process.argv[2] ?? (await charge());
const name = `refund:${chargeId}`;

// The first refundCharge asks the development server to lose its answer:
// the server refunds, then cuts the response after its headers.
let lose = true;
const losingFetch = async (url, init) => {
  const { operationName } = JSON.parse(init.body);
  if (operationName === 'RefundCharge' && lose) {
    lose = false;
    const kept = JSON.parse(await store.get(name));
    console.log(`  kept before the first byte: ${name} → key ${kept.key} (${kept.status})`);
    console.log('  (this request carries X-Chargeonce-Fault: drop-response: its answer will be lost)');
    return fetch(url, { ...init, headers: { ...init.headers, 'X-Chargeonce-Fault': 'drop-response' } });
  }
  return fetch(url, init);
};

const merchant = createMerchant({ endpoint, secretKey, store, fetch: losingFetch, onEvent: show });

console.log(`\nrefundCharge under the name ${name}`);
const outcome = await merchant.refundCharge(name, { chargeId, reason: 'requested_by_customer' });
if (outcome.status === 'SUCCEEDED') {
  const r = outcome.refund;
  console.log(`outcome: SUCCEEDED, refund ${r.id} of ${money(r.amount, r.currency)}, key ${short(outcome.key)}, replayed ${outcome.replayed}`);
} else {
  console.log(`outcome: FAILED, ${outcome.failure.code}: ${outcome.failure.message}`);
}

console.log(`\nthe same name again: answered from the store, no request`);
const again = await merchant.refundCharge(name, { chargeId, reason: 'requested_by_customer' });
console.log(`outcome: ${again.status}, key ${short(again.key)} (the same object: ${JSON.stringify(again) === JSON.stringify(outcome)})`);

if (outcome.status === 'SUCCEEDED' && outcome.refund.providerRefundId) {
  // The provider's own list of the charge's refunds (the simulator's, under /provider in development).
  const provider = `${base}/provider/v1/refunds`;
  const one = await fetch(`${provider}/${outcome.refund.providerRefundId}`).then((r) => r.json());
  const all = await fetch(`${provider}?${new URLSearchParams({ charge: one.charge })}`).then((r) => r.json());
  console.log(`\nthe card provider holds ${all.data.length} refund(s) of charge ${one.charge}: ${all.data.map((r) => `${r.id} ${r.status} ${money(r.amount, r.currency?.toUpperCase() ?? '')}`).join(', ')}`);
}

function show(e) {
  const op = e.request === 'status' ? `${e.operation.replace('Charge', '')}Status` : e.operation;
  switch (e.type) {
    case 'send':
      return console.log(`→ ${op}  key ${short(e.key)}  try ${e.try}`);
    case 'answer':
      if (e.reason) return console.log(`← no answer: ${e.reason}`);
      if (e.code) return console.log(`← error ${e.code} (HTTP ${e.http})`);
      return console.log(`← ${e.status ?? 'null (the server does not know the key)'}${e.replayed ? ', replayed' : ''} (HTTP ${e.http})`);
    case 'retry':
      return console.log(`  retry in ${e.waitMs} ms (${e.cause}), the same key`);
    case 'follow':
      return console.log(`  PROCESSING: ask again in ${e.waitMs} ms`);
    case 'unknown':
      return console.log(`  no answer within the budget: outcome unknown; the record stays open under ${short(e.key)}`);
  }
}

/** Charges 25.00 USD with the test card, server to server; the charge's id. */
async function charge() {
  const res = await graphql(
    'mutation($k: String!, $in: ChargeCardInput!) { chargeCard(idempotencyKey: $k, input: $in) { status charge { id amount currency } failure { code } } }',
    { k: crypto.randomUUID(), in: { amount: 2500, currency: 'USD', paymentMethod: 'pm_card_visa' } },
  );
  const c = res.chargeCard.charge;
  if (!c) throw new Error(`the charge did not succeed: ${JSON.stringify(res.chargeCard)}`);
  console.log(`charged ${money(c.amount, c.currency)} with pm_card_visa: charge ${c.id}`);
  return c.id;
}

async function graphql(query, variables) {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${secretKey}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = await res.json();
  if (body.errors) throw new Error(body.errors.map((e) => `${e.extensions?.code}: ${e.message}`).join('; '));
  return body.data;
}

function money(amount, currency) {
  return `${(amount / 100).toFixed(2)} ${currency}`;
}

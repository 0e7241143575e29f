// The fault switch's fetch (transport.ts): the header on the request it
// picks, a word to the timeline about which one, and nothing read.
import { describe, expect, it } from 'vitest';
import { captureAct, refundAct, voidAct } from './backend';
import { faultFetch, faultHeader, type Outgoing } from './transport';

const chargeCard = (key: string) => ({
  method: 'POST',
  headers: { 'Content-Type': 'application/json', Authorization: 'Bearer co_pk_demo' },
  body: JSON.stringify({ operationName: 'ChargeCard', query: 'mutation…', variables: { idempotencyKey: key } }),
});

/** A fault fetch over a base that records the fault header of each request, and answers ok. */
function switchFor(pick: (r: Outgoing) => string | null) {
  const seen: { url: string; fault: string | null; auth: string | null }[] = [];
  const asked: Outgoing[] = [];
  const faulted: [Outgoing, string][] = [];
  const f = faultFetch(
    { faultFor: (r) => (asked.push(r), pick(r)), faulted: (r, fault) => void faulted.push([r, fault]) },
    async (input, init) => {
      const h = new Headers(init?.headers);
      seen.push({ url: String(input), fault: h.get(faultHeader), auth: h.get('Authorization') });
      return new Response('{"data":{}}');
    },
  );
  return { f, seen, asked, faulted };
}

describe('faultFetch', () => {
  it("adds the fault to the request it picks, keeps the request's own headers, and says which request it was", async () => {
    const { f, seen, asked, faulted } = switchFor((r) => (r.operation === 'chargeCard' ? 'drop-response' : null));
    await f('/graphql', chargeCard('k1'));
    await f('/graphql', { method: 'POST', body: JSON.stringify({ operationName: 'ChargeStatus', variables: { idempotencyKey: 'k1' } }) });
    expect(asked).toEqual([
      { operation: 'chargeCard', key: 'k1' },
      { operation: 'chargeStatus', key: 'k1' },
    ]);
    expect(seen).toEqual([
      { url: '/graphql', fault: 'drop-response', auth: 'Bearer co_pk_demo' },
      { url: '/graphql', fault: null, auth: null },
    ]);
    expect(faulted).toEqual([[{ operation: 'chargeCard', key: 'k1' }, 'drop-response']]);
  });

  it.each([
    [refundAct, { refundId: 'rf-1', chargeId: 'c1' }, 'rf-1'],
    [captureAct, { captureId: 'cap-1', chargeId: 'c1' }, 'cap-1'],
    [voidAct, { voidId: 'v-1', chargeId: 'c1' }, 'v-1'],
  ])("an act of the shop's backend ($field) is known by its route, under the page's id for it", async (act, body, id) => {
    const { f, asked, seen } = switchFor(() => 'drop-response');
    await f(`http://shop.test${act.path}`, { method: 'POST', body: JSON.stringify(body) });
    expect(asked).toEqual([{ operation: act.field, key: id }]);
    expect(seen[0].fault).toBe('drop-response');
  });

  it('a request it cannot read goes as it is, unasked', async () => {
    const { f, asked, seen } = switchFor(() => 'drop-response');
    await f('/ledger');
    await f('/graphql', { method: 'POST', body: 'not json' });
    expect(asked).toEqual([]);
    expect(seen.map((s) => s.fault)).toEqual([null, null]);
  });

  it('hands the answer on untouched: it reads none', async () => {
    const cut = new Response(new ReadableStream({ start: (c) => c.error(new TypeError('network error')) }), { status: 200 });
    const f = faultFetch({ faultFor: () => 'drop-response', faulted: () => {} }, async () => cut);
    const res = await f('/graphql', chargeCard('k1'));
    expect(res).toBe(cut);
    await expect(res.text()).rejects.toThrow(TypeError);
  });
});

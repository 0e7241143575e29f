// The browser tests' chargers: each on the fake chargeonce
// (test/fake-chargeonce.ts) through its fetch option, in a checkout session
// of its own, closed after the test; and what the page's storage holds.
import { createCharger, type Charger, type ChargerEvent, type ChargerOptions } from '../src/index.js';
import type { FakeServer } from '../test/fake-chargeonce.js';

export const card = { paymentMethod: 'tok_visa', amount: 2500, currency: 'USD' };

let sessions = 0;
/** A checkout session no other test uses, so that no record or lock is shared between tests. */
export function newSession(): string {
  return `cs_browser_${Date.now()}_${++sessions}_secret`;
}

const open = new Set<Charger>();

/** A charger on server's fetch, polling (no stream), its events kept in events; closed by closeChargers(). */
export function charger(server: FakeServer, o: Partial<ChargerOptions> & { session: string }, events: ChargerEvent[] = []): Charger {
  const c = createCharger({
    endpoint: '/graphql',
    publishableKey: 'co_pk_browser',
    live: 'poll',
    fetch: server.fetch,
    onEvent: (e) => events.push(e),
    ...o,
  });
  open.add(c);
  return c;
}

export function closeChargers(): void {
  for (const c of open) c.close();
  open.clear();
}

/** Waits (a task at a time, up to 2 s) until ok() holds. */
export async function until(ok: () => boolean, what = 'the condition'): Promise<void> {
  const end = performance.now() + 2_000;
  while (!ok()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The attempt records storage holds now. */
export function records(s: Storage): { key: string; status: string }[] {
  const out: { key: string; status: string }[] = [];
  for (let i = 0; i < s.length; i++) {
    const name = s.key(i)!;
    if (name.startsWith('chargeonce:attempt:')) out.push(JSON.parse(s.getItem(name)!) as { key: string; status: string });
  }
  return out;
}

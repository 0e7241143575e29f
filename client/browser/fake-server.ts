// A chargeonce in the page, behind the charger's fetch option: it charges
// each key at most once and replays it, answers chargeStatus from what it
// charged, and meets each chargeCard with the next step of its script. No
// request leaves the page.
import { createCharger, type Charger, type ChargerEvent, type ChargerOptions } from '../src/index.js';

/**
 * What the next chargeCard meets. hold: charged, but the answer never comes
 * (until the caller aborts). action: PROCESSING with a nextAction (3-D
 * Secure) until finish().
 */
export type Step = 'charge' | 'processing' | 'action' | 'hold' | { code: string; retryAfterMs?: number };

export interface Sent {
  operationName: 'ChargeCard' | 'ChargeStatus';
  key: string;
}

export class FakeServer {
  readonly sent: Sent[] = [];
  readonly charges = new Map<string, { input: string; status: 'SUCCEEDED' | 'PROCESSING'; action?: boolean }>();
  script: Step[] = [];
  /** Called on every request, before it is answered: what the page holds at that moment can be read here. */
  onRequest: (s: Sent) => void = () => {};

  chargeCards(): Sent[] {
    return this.sent.filter((s) => s.operationName === 'ChargeCard');
  }

  statusChecks(): Sent[] {
    return this.sent.filter((s) => s.operationName === 'ChargeStatus');
  }

  finish(key: string): void {
    const c = this.charges.get(key);
    if (c) {
      c.status = 'SUCCEEDED';
      c.action = false;
    }
  }

  readonly fetch: typeof fetch = async (_url, init) => {
    const body = JSON.parse(String(init?.body)) as { operationName: Sent['operationName']; variables: { idempotencyKey: string; input?: unknown } };
    const key = body.variables.idempotencyKey;
    const sent: Sent = { operationName: body.operationName, key };
    this.sent.push(sent);
    this.onRequest(sent);
    if (body.operationName === 'ChargeStatus') {
      return json({ data: { chargeStatus: this.charges.has(key) ? this.payload(key, false) : null } });
    }
    const step = this.script.shift() ?? 'charge';
    if (typeof step === 'object') {
      return json({ errors: [{ message: step.code, extensions: { code: step.code, ...(step.retryAfterMs && { retryAfterMs: step.retryAfterMs }) } }] });
    }
    const input = JSON.stringify(body.variables.input);
    const existing = this.charges.get(key);
    if (existing && existing.input !== input) return json({ errors: [{ message: 'reused', extensions: { code: 'IDEMPOTENCY_KEY_REUSED' } }] });
    if (!existing) this.charges.set(key, { input, status: step === 'processing' || step === 'action' ? 'PROCESSING' : 'SUCCEEDED', action: step === 'action' });
    if (step === 'hold') {
      // The charge went through; only its answer never arrives.
      return new Promise<Response>((_, reject) =>
        init?.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))),
      );
    }
    return json({ data: { chargeCard: this.payload(key, !!existing) } });
  };

  private payload(key: string, replayed: boolean) {
    const c = this.charges.get(key)!;
    const done = c.status === 'SUCCEEDED';
    return {
      idempotencyKey: key,
      status: c.status,
      replayed,
      retryAfterMs: done ? null : 500,
      expiresAt: done ? '2099-01-01T00:00:00Z' : null,
      charge: done
        ? { id: `ch_${key}`, amount: 2500, currency: 'USD', providerChargeId: `p_${key}`, createdAt: '2026-01-01T00:00:00Z', captureStatus: 'CAPTURED', amountCaptured: 2500, amountCapturable: 0, authorizationExpiresAt: null }
        : null,
      failure: null,
      nextAction: c.action ? { type: 'REDIRECT', url: challengeUrl(key), expiresAt: '2099-01-01T00:10:00Z' } : null,
    };
  }
}

export const challengeUrl = (key: string) => `https://bank.example/challenge/${key}`;

function json(body: unknown): Response {
  return new Response(JSON.stringify(body), { headers: { 'Content-Type': 'application/json' } });
}

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

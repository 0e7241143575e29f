// The timeline of the requests sent for the current checkout attempt, kept in
// sessionStorage beside the attempt so that a reload shows what happened
// before it.
import type { KeyValueStorage } from '@chargeonce/client';
import { actOf } from './backend';
import type { RequestRecord } from './transport';

export const timelineStorageKey = 'chargeonce-demo:timeline';

/**
 * The steps of the way to the bank and back, as timeline rows beside the
 * requests (their operation): the page went to the bank's page, and the
 * page is back from it. Neither is a request to chargeonce.
 */
export const redirectStep = 'Redirect';
export const returnStep = 'Return';

interface Stored {
  attemptKey: string;
  requests: RequestRecord[];
}

export class Timeline {
  private attemptKey = '';
  private requests: RequestRecord[] = [];

  constructor(private readonly storage: KeyValueStorage) {}

  /** The key of the attempt whose requests this is, or '' before the first. */
  get attempt(): string {
    return this.attemptKey;
  }

  /**
   * Loads the timeline of the attempt with attemptKey, or starts an empty
   * one. Requests still pending belonged to a page that is gone: their
   * answers will never be read, so they are marked abandoned.
   */
  load(attemptKey: string): void {
    this.attemptKey = attemptKey;
    this.requests = [];
    const raw = this.storage.getItem(timelineStorageKey);
    if (raw) {
      try {
        const s = JSON.parse(raw) as Stored;
        if (s.attemptKey === attemptKey && Array.isArray(s.requests)) {
          this.requests = s.requests.map((r) =>
            r.outcome === 'pending' ? { ...r, outcome: 'abandoned', detail: 'the page was reloaded' } : r,
          );
        }
      } catch {
        // Unreadable: start afresh.
      }
    }
    this.save();
  }

  clear(): void {
    this.attemptKey = '';
    this.requests = [];
    this.storage.removeItem(timelineStorageKey);
  }

  add(r: Omit<RequestRecord, 'n'>): RequestRecord {
    const rec = { ...r, n: this.requests.length + 1 };
    this.requests.push(rec);
    this.save();
    return rec;
  }

  /**
   * The page goes away (to the bank): the requests still pending will not
   * be read, and stay marked so with why, whatever the page hears while it
   * unloads.
   */
  abandonPending(detail: string): void {
    this.requests = this.requests.map((r) => (r.outcome === 'pending' ? { ...r, outcome: 'abandoned', detail } : r));
    this.save();
  }

  update(rec: RequestRecord): void {
    const i = this.requests.findIndex((r) => r.n === rec.n);
    if (i >= 0 && this.requests[i].outcome !== 'abandoned') {
      this.requests[i] = rec;
      this.save();
    }
  }

  all(): readonly RequestRecord[] {
    return this.requests;
  }

  /**
   * Every idempotency key sent for this attempt's charge, in order (several
   * in unsafe mode). An act's id (a refund's, a capture's, a void's) is not one: it is the act's own key.
   */
  keys(): string[] {
    const charging = this.requests.filter((r) => !actOf(r.operation));
    return [...new Set(charging.map((r) => r.idempotencyKey).filter((k) => k !== ''))];
  }

  private save(): void {
    if (this.attemptKey) {
      this.storage.setItem(timelineStorageKey, JSON.stringify({ attemptKey: this.attemptKey, requests: this.requests }));
    }
  }
}

// A slow answer: ask about it, do not send it again. chargeonce answers the
// first chargeCard of a key only once the provider has (for the slow card,
// after SIM_SLOW_DELAY); meanwhile it holds the attempt as PROCESSING. The
// charger waits for that answer, as it should. The page, to show what the
// server holds, asks chargeStatus with the same key once the request has
// been open for patienceMs, at the pace the server asks for. chargeStatus is
// a read: it never charges and does not compete with the request that does
// the work, whose answer still settles the attempt.
import type { Answer } from './request';

/** A normal card answers well within this; a slower one gets asked about. */
export const patienceMsDefault = 1_000;

/** Time, as the watch needs it: window's in the page, a fake in tests. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** What the server said about the open request, once it said PROCESSING. */
export interface SlowNews {
  key: string;
  /** chargeStatus questions answered so far. */
  checks: number;
  retryAfterMs: number | null;
}

export class SlowWatch {
  private key: string | null = null;
  private timer: unknown = null;
  private news: SlowNews | null = null;

  constructor(
    private readonly ask: (key: string) => Promise<Answer>,
    private readonly clock: Clock,
    private readonly changed: () => void,
    private readonly patienceMs = patienceMsDefault,
  ) {}

  /** What the server said while the request is open, or null (not asked yet, or not PROCESSING). */
  get processing(): SlowNews | null {
    return this.news;
  }

  /** A chargeCard request with key went out: ask about it if it is still open after patienceMs. */
  opened(key: string): void {
    this.stop();
    this.key = key;
    this.later(this.patienceMs);
  }

  /** The request answered, or the page no longer waits for it. */
  stop(): void {
    const had = this.news !== null;
    this.key = null;
    this.news = null;
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
    if (had) this.changed();
  }

  private later(ms: number): void {
    this.timer = this.clock.setTimeout(() => {
      this.timer = null;
      void this.question();
    }, ms);
  }

  private async question(): Promise<void> {
    const key = this.key;
    if (key === null) return;
    const answer = await this.ask(key);
    if (this.key !== key || this.timer !== null) return; // answered or stopped meanwhile
    const p = answer.kind === 'payload' ? answer.payload : null;
    if (p && p.status !== 'PROCESSING') return; // the request's own answer follows at once
    if (p) {
      this.news = { key, checks: (this.news?.checks ?? 0) + 1, retryAfterMs: p.retryAfterMs ?? null };
      this.changed();
    }
    // An unknown key (the claim is not committed yet) or no answer: ask again.
    this.later(Math.min(p?.retryAfterMs || patienceMsDefault, patienceMsDefault));
  }
}

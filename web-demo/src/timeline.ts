// The timeline of the requests sent for the current checkout attempt, kept in
// sessionStorage beside the attempt so that a reload shows what happened
// before it. Its rows are drawn from what the library says: the charger's
// send and answer events (and the runner's, for the shop's acts on the
// charge), the answer events of the page's own requests (request.ts, in
// the library's words: answerEvent), and the charger's live status
// (liverow.ts). Nothing here reads an answer.
import type { ChargerEvent, ChargeStatus, KeyValueStorage, OperationStatus } from '@chargeonce/client';
import { actOf } from './backend';

export const timelineStorageKey = 'chargeonce-demo:timeline';

/**
 * The steps of the way to the bank and back, as timeline rows beside the
 * requests (their operation): the page went to the bank's page, and the
 * page is back from it. Neither is a request to chargeonce.
 */
export const redirectStep = 'redirect';
export const returnStep = 'return';

export type Outcome =
  | 'pending' // sent, no answer yet
  | 'network-error' // no usable answer: the outcome is unknown
  | 'answered' // the operation's payload
  | 'graphql-error' // an error: chargeonce's, or the shop's backend's refusal (it carries the API's code)
  | 'abandoned' // the page went away before the answer
  | 'unavailable' // a live status subscription that failed: the page polls instead
  | 'closed' // a live status subscription the page ended: the outcome came another way
  | 'navigated' // a step, not a request: the page went to the bank's page (nextAction)
  | 'returned'; // a step, not a request: the page is back from the bank (detail: where it found the attempt)

export interface RequestRecord {
  /** 1 for the first request of the checkout attempt, 2 for the next… */
  n: number;
  /** The API's field the request asks for (chargeCard, chargeStatus, chargeUpdated; refundCharge… for the shop's acts), or a step. */
  operation: string;
  idempotencyKey: string;
  sentAt: string;
  /** The development fault the request asked for (transport.ts). */
  fault?: string;
  outcome: Outcome;
  httpStatus?: number;
  /** From the answer: null when chargeStatus knows no such key. */
  status?: ChargeStatus | OperationStatus | null;
  replayed?: boolean;
  /** From a PROCESSING answer: the type of its nextAction (REDIRECT: the shopper must authenticate). */
  nextAction?: string;
  /** The error's code, or why there was no answer. */
  detail?: string;
  /** The wait the server asked for with its error (retryAfterMs, or Retry-After). */
  retryAfterMs?: number;
}

/**
 * What an answer event says (the charger's, the runner's, or answerEvent's
 * for the page's own requests): the library's one reading of an answer.
 */
export type AnswerEvent = Pick<
  Extract<ChargerEvent, { type: 'answer' }>,
  'http' | 'status' | 'replayed' | 'code' | 'reason' | 'hintMs' | 'nextAction'
>;

/** A pending row, made an answered one by what its answer event says. */
export function answeredRow(r: RequestRecord, e: AnswerEvent): RequestRecord {
  const http = e.http !== undefined ? { httpStatus: e.http } : {};
  if (e.reason !== undefined) return { ...r, ...http, outcome: 'network-error', detail: e.reason };
  if (e.code !== undefined) return { ...r, ...http, outcome: 'graphql-error', detail: e.code, ...(e.hintMs ? { retryAfterMs: e.hintMs } : {}) };
  return {
    ...r,
    ...http,
    outcome: 'answered',
    status: e.status ?? null,
    ...(e.replayed !== undefined ? { replayed: e.replayed } : {}),
    ...(e.nextAction ? { nextAction: e.nextAction } : {}),
  };
}

interface Stored {
  attemptKey: string;
  requests: RequestRecord[];
}

/** A send or an answer event of the library's: the charger's (ChargerEvent) or the runner's (RunnerEvent). */
export type WireEvent = ({ type: 'send' } | ({ type: 'answer' } & AnswerEvent)) & { operation: string; key: string };

export class Timeline {
  private attemptKey = '';
  private requests: RequestRecord[] = [];
  /**
   * Why the page is going away, while it is (a reload, the way to the
   * bank): a request the browser cuts then was not lost by the network,
   * and nobody reads its answer.
   */
  leaving: string | null = null;

  /** changed hears every row added or changed. */
  constructor(
    private readonly storage: KeyValueStorage,
    private readonly changed: (r: RequestRecord) => void = () => {},
  ) {}

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
    this.changed(rec);
    return rec;
  }

  update(rec: RequestRecord): void {
    const i = this.requests.findIndex((r) => r.n === rec.n);
    if (i >= 0 && this.requests[i].outcome !== 'abandoned') {
      this.requests[i] = rec;
      this.save();
      this.changed(rec);
    }
  }

  /** A request of operation under key went out: its pending row. */
  request(operation: string, key: string): RequestRecord {
    return this.add({ operation, idempotencyKey: key, sentAt: new Date().toISOString(), outcome: 'pending' });
  }

  /** The answer to the request of row r, in the library's words: its row as it is now (a fault may have been noted since), answered. */
  answer(r: RequestRecord | undefined, e: AnswerEvent): void {
    const now = r && this.requests.find((x) => x.n === r.n && x.idempotencyKey === r.idempotencyKey);
    if (now?.outcome !== 'pending') return;
    const next = answeredRow(now, e);
    this.update(this.leaving && next.outcome === 'network-error' ? { ...next, outcome: 'abandoned', detail: this.leaving } : next);
  }

  /**
   * The library's word on one of its requests: its send (a new row), or its
   * answer, which answers the oldest row of the operation and key still
   * waiting (the library tells every send's answer, in order).
   */
  told(e: WireEvent): void {
    if (e.type === 'send') this.request(e.operation, e.key);
    else this.answer(this.requests.find((r) => r.outcome === 'pending' && r.operation === e.operation && r.idempotencyKey === e.key), e);
  }

  /** The request of operation under key that went out last asked for fault: its row says so. */
  fault(operation: string, key: string, fault: string): void {
    for (let i = this.requests.length - 1; i >= 0; i--) {
      const r = this.requests[i];
      if (r.outcome === 'pending' && r.operation === operation && r.idempotencyKey === key) {
        this.update({ ...r, fault });
        return;
      }
    }
  }

  /**
   * The page goes away (to the bank): the requests still pending will not
   * be read, and stay marked so with why, whatever the page hears while it
   * unloads.
   */
  abandonPending(detail: string): void {
    this.leaving = detail;
    this.requests = this.requests.map((r) => (r.outcome === 'pending' ? { ...r, outcome: 'abandoned', detail } : r));
    this.save();
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

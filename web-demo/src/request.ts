// The demo's own GraphQL requests, beside the charger's: the question about
// a slow chargeCard (slow.ts) and unsafe mode's naive sender (unsafe.ts).
// They send the library's own documents (generated from
// client/operations.graphql) by the library's own POST (post), so that an
// answer means to them what it means to the charger, and they are told to
// the timeline in the charger's words (answerEvent).
import { answerEvent, chargeCardDocument, chargeStatusDocument, post, type Answer } from '@chargeonce/client';
import type { AnswerEvent } from './timeline';

export type { Answer };

export interface Endpoint {
  url: string;
  fetch: typeof fetch;
  /** The publishable key the page pays with. */
  publishableKey: string;
  /** Hears a request of operation under key go out; what it returns hears its answer, in the library's words. */
  watch?(operation: 'chargeCard' | 'chargeStatus', key: string): (answer: AnswerEvent) => void;
}

/** How long one of the demo's requests may go unanswered before it counts as lost. */
const requestTimeoutMs = 30_000;

const documents = {
  chargeCard: { operationName: 'ChargeCard', query: chargeCardDocument },
  chargeStatus: { operationName: 'ChargeStatus', query: chargeStatusDocument },
} as const;

/** POSTs one of the library's operations and reads its answer as the charger does. It never throws. */
export async function send(
  to: Endpoint,
  operation: 'chargeCard' | 'chargeStatus',
  variables: { idempotencyKey: string } & Record<string, unknown>,
): Promise<Answer> {
  const answered = to.watch?.(operation, variables.idempotencyKey);
  const a = await post({ ...documents[operation], variables }, operation, {
    fetch: to.fetch,
    endpoint: to.url,
    headers: { Authorization: `Bearer ${to.publishableKey}` },
    timeoutMs: requestTimeoutMs,
    now: () => Date.now(),
  });
  answered?.(answerEvent(variables.idempotencyKey, operation, a));
  return a;
}

// The demo's own GraphQL requests, beside the charger's: the question about
// a slow chargeCard (slow.ts) and unsafe mode's naive sender (unsafe.ts).
// They go through the same recording fetch as the charger's, and are sent
// and read by the library's own POST (post), so that an answer means to
// them what it means to the charger.
import { chargeCardDocument, post, type Answer } from '@chargeonce/client';

export type { Answer };
export { retryableCodes } from '@chargeonce/client';

/** The demo's own status question, named apart from the charger's so the timeline can tell them apart. */
export const chargeStatusQuery = `query SessionChargeStatus($idempotencyKey: String!, $checkoutSession: String!) {
  chargeStatus(idempotencyKey: $idempotencyKey, checkoutSession: $checkoutSession) {
    idempotencyKey status replayed retryAfterMs expiresAt
    charge { id amount currency orderId providerChargeId createdAt captureStatus amountCaptured amountCapturable authorizationExpiresAt }
    failure { code message }
  }
}`;

export interface Endpoint {
  url: string;
  fetch: typeof fetch;
  /** The publishable key the page pays with. */
  publishableKey: string;
}

/** How long one of the demo's requests may go unanswered before it counts as lost. */
const requestTimeoutMs = 30_000;

/** POSTs one operation and reads its answer as the charger does. It never throws. */
export function send(
  to: Endpoint,
  operationName: 'ChargeCard' | 'SessionChargeStatus',
  variables: Record<string, unknown>,
): Promise<Answer> {
  const charge = operationName === 'ChargeCard';
  return post({ operationName, query: charge ? chargeCardDocument : chargeStatusQuery, variables }, charge ? 'chargeCard' : 'chargeStatus', {
    fetch: to.fetch,
    endpoint: to.url,
    headers: { Authorization: `Bearer ${to.publishableKey}` },
    timeoutMs: requestTimeoutMs,
    now: () => Date.now(),
  });
}

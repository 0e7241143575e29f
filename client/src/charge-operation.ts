// chargeCard as an operation: the one definition of what charging sends
// (the ChargeCard mutation, under the attempt's key) and how it is asked
// about (the ChargeStatus query), which both drivers use. The charger
// drives it from a page with its state machine (the tabs, the live
// stream, offline and hidden, the shopper's bank); the operation runner
// drives it from a merchant's server (createMerchant's chargeCard) as it
// drives every other operation.
import { chargeCardDocument, chargeStatusDocument } from './generated/operations.js';
import type { Operation } from './operation.js';
import { post, type Answer, type PostOptions } from './transport.js';
import type { Charge, ChargeCardInput, ChargePayload } from './types.js';

/** chargeCard's operation, whose status query always exists. */
export type ChargeOperation = Operation<ChargeCardInput, ChargePayload, { charge: Charge }> & { status(key: string): Promise<Answer<ChargePayload>> };

/**
 * The charge operation over o. session: the checkout session to name in
 * the status query (a publishable key is answered only about its
 * session's attempts), asked at each query.
 */
export function chargeOperation(o: PostOptions, session: () => string | undefined = () => undefined): ChargeOperation {
  return {
    name: 'chargeCard',
    send: (key, input) => post({ operationName: 'ChargeCard', query: chargeCardDocument, variables: { idempotencyKey: key, input } }, 'chargeCard', o),
    status(key) {
      const checkoutSession = session();
      const variables = checkoutSession ? { idempotencyKey: key, checkoutSession } : { idempotencyKey: key };
      return post({ operationName: 'ChargeStatus', query: chargeStatusDocument, variables }, 'chargeStatus', o);
    },
    made: (p) => (p.charge ? { charge: p.charge } : null),
  };
}

// What the server tells the playground page: the GraphQL endpoint and the
// headers to start with. It arrives as JSON in <script type="application/json"
// id="playground-config">, which web-demo/webdemo.go fills in.

export interface PlaygroundConfig {
  /** The GraphQL endpoint, a path on this server. */
  endpoint: string;
  /** Request headers to fill in: in development, the demo key's Authorization. */
  headers: Record<string, string>;
}

const fallback: PlaygroundConfig = { endpoint: '/graphql', headers: {} };

/** Reads the config from the element's text; anything unusable falls back to /graphql and no headers. */
export function readPlaygroundConfig(text: string | null | undefined): PlaygroundConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(text ?? '');
  } catch {
    return { ...fallback };
  }
  if (typeof raw !== 'object' || raw === null) return { ...fallback };
  const { endpoint, headers } = raw as { endpoint?: unknown; headers?: unknown };
  const out: PlaygroundConfig = {
    endpoint: typeof endpoint === 'string' && endpoint !== '' ? endpoint : fallback.endpoint,
    headers: {},
  };
  if (typeof headers === 'object' && headers !== null) {
    for (const [k, v] of Object.entries(headers)) if (typeof v === 'string') out.headers[k] = v;
  }
  return out;
}

/** The headers editor's text: JSON, empty when there are none. */
export function headersText(headers: Record<string, string>): string {
  return Object.keys(headers).length ? JSON.stringify(headers, null, 2) : '';
}

/** The first tab's query: the README's example, a charge that a second run replays. */
export const defaultQuery = `# chargeonce charges a card at most once
# per idempotency key. Run this, then run it
# again: the second answer is the same charge,
# with "replayed": true. Change the amount and
# keep the key: IDEMPOTENCY_KEY_REUSED.
mutation {
  chargeCard(
    idempotencyKey: "checkout-7f3a"
    input: { amount: 1999, currency: "USD", paymentMethod: "pm_card_visa", orderId: "order-1001" }
  ) {
    status
    replayed
    charge { id amount currency providerChargeId createdAt }
    failure { code message }
    retryAfterMs
    expiresAt
  }
}
`;

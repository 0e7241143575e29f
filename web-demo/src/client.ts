// The demo's GraphQL client: urql with the retry exchanges in front of fetch.
// No cache exchange: every chargeStatus poll must reach the server.
import { Client, fetchExchange } from '@urql/core';
import { retryExchanges, type RetryModeOptions } from './retry';
import { recordingFetch, type TransportHooks } from './transport';

export interface ClientOptions extends RetryModeOptions {
  url?: string;
  /**
   * The merchant's chargeonce API key. Only a demo may hold it in a browser:
   * a real checkout sends the idempotency key to its own backend, which adds
   * the API key and calls chargeonce with the same retry rules.
   */
  apiKey: string;
  hooks: TransportHooks;
}

export function createClient({ url = '/graphql', apiKey, hooks, unsafe, mintKey }: ClientOptions): Client {
  return new Client({
    url,
    exchanges: [...retryExchanges({ unsafe, mintKey }), fetchExchange],
    fetch: recordingFetch(hooks),
    fetchOptions: { headers: { Authorization: `Bearer ${apiKey}` } },
    // POST for queries too: one request shape for the timeline to read.
    preferGetMethod: false,
    requestPolicy: 'network-only',
  });
}

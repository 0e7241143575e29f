// The demo's GraphQL client: urql with the retry exchanges in front of fetch.
// No cache exchange: every chargeStatus poll must reach the server.
import { Client, fetchExchange } from '@urql/core';
import { retryExchanges, type RetryModeOptions } from './retry';
import { recordingFetch, type TransportHooks } from './transport';

export interface ClientOptions extends RetryModeOptions {
  url?: string;
  /**
   * The merchant's publishable key (co_pk_…), from the shop's backend, read
   * at each request: it may only pay a checkout session by its client
   * secret, so a browser may hold it. The secret key never reaches the page.
   */
  publishableKey: () => string | null;
  hooks: TransportHooks;
}

export function createClient({ url = '/graphql', publishableKey, hooks, unsafe, mintKey, newSession }: ClientOptions): Client {
  return new Client({
    url,
    exchanges: [...retryExchanges({ unsafe, mintKey, newSession }), fetchExchange],
    fetch: recordingFetch(hooks),
    fetchOptions: () => {
      const key = publishableKey();
      return key ? { headers: { Authorization: `Bearer ${key}` } } : {};
    },
    // POST for queries too: one request shape for the timeline to read.
    preferGetMethod: false,
    requestPolicy: 'network-only',
  });
}

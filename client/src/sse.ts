// chargeUpdated over server-sent events: a POST with Accept:
// text/event-stream, read with fetch and a ReadableStream. Loaded by the
// charger (live: 'sse', the default) only when an attempt is PROCESSING.
import { once, subscription, why, type GraphQLResult, type LiveHandlers, type LiveOptions } from './stream.js';
import { describe } from './transport.js';

/** Follows the attempt; returns what ends it. */
export function open(o: LiveOptions, handlers: LiveHandlers): () => void {
  const ctl = new AbortController();
  const h = once(handlers, () => ctl.abort());
  void (async () => {
    const res = await o.fetch(o.endpoint, {
      method: 'POST',
      headers: { ...o.headers, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify({ ...subscription, variables: o.variables }),
      signal: ctl.signal,
    });
    if (!res.ok || !res.body || !res.headers.get('Content-Type')?.startsWith('text/event-stream')) {
      let reason = `HTTP ${res.status}`;
      try {
        reason += ` ${why((JSON.parse(await res.text()) as GraphQLResult).errors, '')}`;
      } catch {
        // not JSON: the status says enough
      }
      return h.failed(reason.trim());
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buf += value;
      // One event per blank line; its event: and data: lines (keep-alive comments have neither).
      let end: number;
      while ((end = buf.search(/\r?\n\r?\n/)) >= 0) {
        const frame = buf.slice(0, end);
        buf = buf.slice(end).replace(/^\r?\n\r?\n/, '');
        const event = /^event: ?(.*)$/m.exec(frame)?.[1]?.trim();
        const data = [...frame.matchAll(/^data: ?(.*)$/gm)].map((m) => m[1]).join('\n');
        if (event === 'complete') return h.failed('the stream completed without a final state');
        if (!data) continue;
        let r: GraphQLResult;
        try {
          r = JSON.parse(data) as GraphQLResult;
        } catch {
          return h.failed('an event that is not JSON');
        }
        h.result(r);
        if (h.done()) return;
      }
    }
    h.failed('the stream ended without a final state');
  })().catch((err: unknown) => h.failed(describe(err)));
  return () => h.failed('closed');
}

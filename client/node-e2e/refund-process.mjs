// One merchant's server process for restart.e2e.ts: refunds a charge under
// the name refund:<chargeId>, its key kept in a file store, with the built
// package (@chargeonce/client/server, dist/). It prints each of the
// runner's events, then the outcome, as one JSON line each.
//
//   node refund-process.mjs <endpoint> <secret key> <store dir> <charge id> lose-every-answer|normal
//
// lose-every-answer: every request carries devfault's drop-response (the
// server runs it, then cuts its answer), and the wait before a retry is
// minutes long, so that the process can be killed between two sends.
import { createMerchant, fileKeyStore } from '@chargeonce/client/server';

const [endpoint, secretKey, dir, chargeId, mode] = process.argv.slice(2);
const lose = mode === 'lose-every-answer';
const print = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

const merchant = createMerchant({
  endpoint,
  secretKey,
  store: fileKeyStore(dir),
  fetch: lose ? (url, init) => fetch(url, { ...init, headers: { ...init.headers, 'X-Chargeonce-Fault': 'drop-response' } }) : fetch,
  retry: lose ? { baseMs: 600_000, capMs: 600_000, budgetMs: 3_600_000 } : undefined,
  onEvent: (event) => print({ event }),
});
try {
  print({ outcome: await merchant.refundCharge(`refund:${chargeId}`, { chargeId }) });
} catch (err) {
  print({ error: { name: err.name, message: err.message } });
  process.exitCode = 1;
}

// The operation runner: one idempotent operation (a refund, a capture, a
// page's own call to its shop's backend) run to its outcome with the
// charger's discipline. A key is minted once per name and kept in the
// caller's store, with the input, before the first byte is sent; every
// retry, and every later run of the name (after a crash, a restart, an
// unknown outcome), sends that key again and never another. It retries
// only what ran nothing or went unanswered, with the charger's backoff
// (transport.ts reads the answers, backoff.ts says how long to wait);
// PROCESSING is followed by the status query at the server's pace, not
// sent again; and it ends with a typed outcome or a typed error.
import { retryPolicy, retryWaitMs } from './backoff.js';
import { abortable, AbortError } from './errors.js';
import { machineDefaults } from './machine.js';
import { pollDelay } from './following.js';
import { NameInUseError, OperationRejectedError, OperationUnknownError } from './operation-errors.js';
import type {
  Operation,
  OperationOutcome,
  OperationPayload,
  OperationRecord,
  RunnerClock,
  RunnerEvent,
  RunnerOptions,
  Runner,
  RunOptions,
  RunRequest,
} from './operation.js';
import { expired, sameInput } from './record.js';
import type { Answer } from './transport.js';

const realClock: RunnerClock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/**
 * How long the server keeps a key's result after its outcome (its
 * KEY_RETENTION, 24 h): an open record older than this is only asked about,
 * never sent again, since the server would take its key for a new operation.
 */
export const keyRetentionMsDefault = 24 * 60 * 60 * 1000;

/** A run going on: its key once its record is read or written (keyed), and its end. */
interface Going {
  operation: string;
  input: object;
  key?: string;
  keyed: Promise<void>;
  done: Promise<OperationOutcome<object>>;
}

/** A runner of operations whose records live in o.store. */
export function createRunner(o: RunnerOptions): Runner {
  const clock = o.clock ?? realClock;
  const random = o.random ?? Math.random;
  const mint = o.mintKey ?? (() => globalThis.crypto.randomUUID());
  const policy = retryPolicy(o.retry);
  const retentionMs = o.keyRetentionMs ?? keyRetentionMsDefault;
  /**
   * Whether the server may have forgotten rec's key: past the expiresAt an
   * answer gave, or past the server's retention since the record was made
   * (no outcome under the key can be older than the record).
   */
  const forgettable = (rec: OperationRecord) =>
    expired(rec, clock.now()) || clock.now() - Date.parse(rec.createdAt) >= retentionMs;
  /** The runs going on in this process, by name: a second run of one name joins the first. */
  const running = new Map<string, Going>();

  async function read(name: string): Promise<OperationRecord | null> {
    const raw = await o.store.get(name);
    if (raw === null) return null;
    const r = parse(raw);
    // Never a new key over a record that cannot be read: its operation may have been done.
    if (!r) throw new Error(`the record ${name} is unreadable; its key is not replaced. Repair or delete it by hand`);
    return r;
  }

  const write = (name: string, r: OperationRecord) => o.store.set(name, JSON.stringify(r));

  /** The name's record for input: the stored one, or a new one persisted before anything is sent (fresh). */
  async function recordFor(operation: string, name: string, input: object): Promise<{ rec: OperationRecord; fresh: boolean }> {
    for (;;) {
      const stored = await read(name);
      if (stored) {
        if (stored.operation !== operation || !sameInput(stored.input, input)) throw new NameInUseError(name, stored.key, stored.status);
        return { rec: stored, fresh: false };
      }
      const rec: OperationRecord = { v: 1, operation, key: mint(), input, createdAt: new Date(clock.now()).toISOString(), status: 'open' };
      if (await o.store.create(name, JSON.stringify(rec))) return { rec, fresh: true };
      // Another process created it a moment ago: read it, and use its key.
    }
  }

  function run<I extends object, P extends OperationPayload, M extends object>(
    op: Operation<I, P, M>,
    name: string,
    input: I,
    ro: RunOptions = {},
  ): Promise<OperationOutcome<M>> {
    let r = running.get(name);
    if (r && (r.operation !== op.name || !sameInput(r.input, input))) {
      const other = r;
      return other.keyed.then(() => Promise.reject(new NameInUseError(name, other.key ?? '', 'open')));
    }
    if (!r) r = start(op, name, input);
    const joined = r;
    const done = joined.done as Promise<OperationOutcome<M>>;
    return ro.signal ? abortable(done, ro.signal, () => new AbortError(joined.key)) : done;
  }

  function start<I extends object, P extends OperationPayload, M extends object>(op: Operation<I, P, M>, name: string, input: I): Going {
    let keyed!: () => void;
    const r: Omit<Going, 'done'> = { operation: op.name, input, keyed: new Promise<void>((resolve) => (keyed = resolve)) };
    const done = (async (): Promise<OperationOutcome<M>> => {
      try {
        const { rec, fresh } = await recordFor(op.name, name, input);
        r.key = rec.key;
        keyed();
        if (rec.status === 'settled' && rec.outcome) return rec.outcome as OperationOutcome<M>;
        return await drive(op, name, rec as OperationRecord<I, M>, fresh);
      } finally {
        running.delete(name);
        keyed();
      }
    })();
    // A caller that stopped waiting leaves the run to end on its own, and its rejection to nobody.
    done.catch(() => {});
    const started = Object.assign(r, { done: done as Promise<OperationOutcome<object>> });
    running.set(name, started);
    return started;
  }

  async function drive<I extends object, P extends OperationPayload, M extends object>(
    op: Operation<I, P, M>,
    name: string,
    rec: OperationRecord<I, M>,
    fresh: boolean,
  ): Promise<OperationOutcome<M>> {
    const base = { name, key: rec.key, operation: op.name };
    const emit = (e: RunnerEvent) => o.onEvent?.(e);
    const unknown = () => {
      emit({ type: 'unknown', ...base });
      return new OperationUnknownError(name, rec.key);
    };
    // A record found open may have been sent, by this process or one that
    // died: ask about it first, and send it again only if the server never
    // saw it. A rejected one ran nothing: it is sent again. A record the
    // server may have forgotten (forgettable) is only asked about: the
    // server would take its key for a new operation.
    let request: RunRequest = op.status && !fresh && rec.status === 'open' ? 'status' : 'send';
    if (forgettable(rec)) {
      if (!op.status) throw unknown();
      request = 'status';
    }
    let since = clock.now();
    let tries = 0;
    let checks = 0;
    for (;;) {
      tries++;
      emit({ type: 'send', ...base, request, try: tries });
      const a: Answer<P> = request === 'send' ? await op.send(rec.key, rec.input) : await op.status!(rec.key);
      emit(answerEvent(base, request, a));
      if (a.kind === 'payload' && a.payload === null && request === 'status') {
        // The server never saw the key: the operation never arrived. Send it, the same key.
        if (forgettable(rec)) throw unknown();
        request = 'send';
        since = clock.now();
        tries = 0;
        continue;
      }
      const p = a.kind === 'payload' ? a.payload : null;
      const made = p?.status === 'SUCCEEDED' ? op.made(p) : null;
      if (p && (p.status === 'FAILED' || made)) {
        const outcome = (
          made
            ? { status: 'SUCCEEDED', key: rec.key, replayed: p.replayed, ...made }
            : { status: 'FAILED', key: rec.key, replayed: p.replayed, failure: p.failure ?? { code: 'failed', message: 'The operation failed.' } }
        ) as OperationOutcome<M>;
        await write(name, { ...rec, status: 'settled', outcome, ...(p.expiresAt ? { expiresAt: p.expiresAt } : {}) });
        return outcome;
      }
      if (p?.status === 'PROCESSING') {
        if (p.expiresAt && p.expiresAt !== rec.expiresAt) await write(name, (rec = { ...rec, expiresAt: p.expiresAt }));
        if (op.status) request = 'status';
        const waitMs = pollDelay(p.retryAfterMs ?? machineDefaults.pollMs, checks++, machineDefaults);
        emit({ type: 'follow', ...base, waitMs });
        await clock.sleep(waitMs);
        since = clock.now();
        tries = 0;
        continue;
      }
      if (a.kind === 'error' && !a.retryable) {
        // A refusal of the status query says nothing of the operation: it stays unknown.
        if (request === 'status') throw unknown();
        await write(name, { ...rec, status: 'rejected', error: a.error });
        throw new OperationRejectedError(name, rec.key, a.error.code, a.error.message, a.error.field, a.error.extensions);
      }
      // No answer (or one without the operation's payload), or a busy server: the same request again.
      const hint = a.kind === 'payload' ? undefined : a.hintMs;
      const waitMs = retryWaitMs(tries - 1, random(), hint, policy);
      if (tries >= policy.maxAttempts || clock.now() + waitMs - since > policy.budgetMs) {
        if (rec.status !== 'open') await write(name, { ...rec, status: 'open' });
        throw unknown();
      }
      emit({ type: 'retry', ...base, request, try: tries + 1, waitMs, cause: a.kind === 'error' ? a.error.code : a.kind === 'lost' ? 'network' : 'no payload' });
      await clock.sleep(waitMs);
    }
  }

  return {
    run,
    record: read,
    async forget(name) {
      const going = running.get(name);
      if (going) {
        await going.keyed;
        throw new NameInUseError(name, going.key ?? '', 'open');
      }
      const r = await read(name);
      if (!r) return;
      if (r.status === 'open') throw new NameInUseError(name, r.key, 'open');
      await o.store.delete(name);
    },
  };
}

function answerEvent(base: { name: string; key: string; operation: string }, request: RunRequest, a: Answer<OperationPayload>): RunnerEvent {
  const p = a.kind === 'payload' ? a.payload : undefined;
  return {
    type: 'answer',
    ...base,
    request,
    ...(a.http !== undefined && { http: a.http }),
    ...(a.kind === 'payload' && { status: p?.status ?? null, ...(p && { replayed: p.replayed }) }),
    ...(a.kind === 'error' && { code: a.error.code }),
    ...(a.kind === 'lost' && { reason: a.reason }),
  };
}

/** A stored record, or null when raw is not one. */
function parse(raw: string): OperationRecord | null {
  let r: Partial<OperationRecord> | null;
  try {
    r = JSON.parse(raw) as Partial<OperationRecord> | null;
  } catch {
    return null;
  }
  if (!r || r.v !== 1 || typeof r.key !== 'string' || !r.key || typeof r.operation !== 'string' || !r.input) return null;
  return r.status === 'open' || r.status === 'rejected' || r.status === 'settled' ? (r as OperationRecord) : null;
}

-- name: ClaimChargeAttempt :one
-- The claim, and the replay's read, in one statement and one round trip.
-- The INSERT claims the key, holding the attempt's lease, unless this
-- merchant already used it in its scope (key_session_id: NULL for the
-- merchant's own keys, a session's id for the keys a browser sends on that
-- session). The unique index on (merchant_id, idempotency_key,
-- key_session_id) makes the claim atomic across instances; the one on
-- (merchant_id, order_id) refuses a second live attempt for an order with a
-- unique violation, and an order with a recorded charge inserts nothing.
--   claimed = true: this request owns the attempt and may call the provider.
--   claimed = false: the key's stored attempt, with its charge, to answer
--   the retry from (a replay, PROCESSING, or key reuse).
--   no row: neither; the key was claimed by a transaction that committed
--   after this statement's snapshot (read it again), or the order is paid.
-- An attempt on a checkout session is claimed only while the session is
-- open, unexpired at now and below max_session_attempts, and counts one
-- attempt of it; the unique index on checkout_session_id refuses a second
-- live attempt for the session, as the order's does.
-- Who claimed it (claim_source) and when (created_at, the caller's clock,
-- as every write of the attempt) are the history's record of the claim,
-- and of the provider call it lets its holder make.
-- Both parts see the same snapshot, so the read never sees the row this
-- statement inserts: at most one row comes back. A key the snapshot shows
-- taken is not inserted at all (the first NOT EXISTS): a replay costs an
-- index read, where an INSERT that ends in its conflict costs about as
-- much as the rest of the statement; a key taken after the snapshot still
-- ends in the conflict, and in no row.
WITH claimed AS (
    INSERT INTO charge_attempts (
        id, merchant_id, idempotency_key, fingerprint, provider_key,
        amount, currency, payment_method, order_id, description, locked_until, expires_at,
        checkout_session_id, return_url, key_session_id, capture_method, claim_request_id, claim_instance, claim_source,
        created_at
    )
    SELECT @id, @merchant_id, @idempotency_key, @fingerprint, @provider_key,
           @amount, @currency, @payment_method, sqlc.narg(order_id), sqlc.narg(description),
           sqlc.arg(locked_until)::timestamptz, sqlc.arg(expires_at)::timestamptz,
           sqlc.narg(checkout_session_id)::uuid, sqlc.narg(return_url)::text, sqlc.narg(key_session_id)::uuid,
           sqlc.narg(capture_method)::text, sqlc.narg(claim_request_id)::uuid, sqlc.narg(claim_instance)::text,
           sqlc.narg(claim_source)::jsonb, sqlc.arg(now)::timestamptz
    WHERE NOT EXISTS (
        SELECT 1 FROM charge_attempts t
        WHERE t.merchant_id = @merchant_id AND t.idempotency_key = @idempotency_key
          AND t.key_session_id IS NOT DISTINCT FROM sqlc.narg(key_session_id)::uuid
    )
    AND NOT EXISTS (
        SELECT 1 FROM charges c
        WHERE c.merchant_id = @merchant_id AND c.order_id = sqlc.narg(order_id)
    )
    AND (sqlc.narg(checkout_session_id)::uuid IS NULL OR EXISTS (
        SELECT 1 FROM checkout_sessions s
        WHERE s.id = sqlc.narg(checkout_session_id)::uuid AND s.merchant_id = @merchant_id
          AND s.status = 'OPEN' AND s.expires_at > sqlc.arg(now)::timestamptz
          AND s.attempts < sqlc.arg(max_session_attempts)::integer
    ))
    ON CONFLICT (merchant_id, idempotency_key, key_session_id) DO NOTHING
    RETURNING *
),
counted AS (
    UPDATE checkout_sessions SET attempts = attempts + 1
    WHERE id = (SELECT checkout_session_id FROM claimed)
)
SELECT sqlc.embed(a),
       c.provider_charge_id,
       c.created_at AS charge_created_at,
       r.provider_refund_id,
       r.created_at AS refund_created_at,
       r.status AS refund_status,
       r.failure_code AS refund_failure_code,
       r.failure_message AS refund_failure_message,
       false AS claimed
FROM charge_attempts a
LEFT JOIN charges c ON c.id = a.charge_id
LEFT JOIN refunds r ON r.id = a.refund_id
WHERE a.merchant_id = @merchant_id AND a.idempotency_key = @idempotency_key
  AND a.key_session_id IS NOT DISTINCT FROM sqlc.narg(key_session_id)::uuid
UNION ALL
SELECT claimed.*, NULL, NULL, NULL, NULL, NULL, NULL, NULL, true FROM claimed;

-- name: ClaimChargeAttempts :many
-- ClaimChargeAttempt for many attempts off checkout sessions at once (one
-- element of the arrays each): what concurrent requests claim while
-- another claim is running goes in one statement and one commit
-- (payment's claims). Empty strings, and the nil uuid for key_session_id,
-- stand for NULL. Each key comes back as ClaimChargeAttempt's would, by
-- its (merchant_id, idempotency_key, key_session_id): its stored attempt
-- (claimed = false), the attempt inserted for it (claimed = true), or
-- nothing (taken after the statement's snapshot, by another statement or
-- by another element of this one; or its order is paid). Any error
-- writes nothing, and the caller claims each again on its own.
WITH input AS (
    SELECT unnest(sqlc.arg(id)::uuid[]) AS id,
           unnest(sqlc.arg(merchant_id)::uuid[]) AS merchant_id,
           unnest(sqlc.arg(idempotency_key)::text[]) AS idempotency_key,
           unnest(sqlc.arg(fingerprint)::bytea[]) AS fingerprint,
           unnest(sqlc.arg(provider_key)::text[]) AS provider_key,
           unnest(sqlc.arg(amount)::bigint[]) AS amount,
           unnest(sqlc.arg(currency)::text[]) AS currency,
           unnest(sqlc.arg(payment_method)::text[]) AS payment_method,
           unnest(sqlc.arg(order_id)::text[]) AS order_id,
           unnest(sqlc.arg(description)::text[]) AS description,
           unnest(sqlc.arg(locked_until)::timestamptz[]) AS locked_until,
           unnest(sqlc.arg(expires_at)::timestamptz[]) AS expires_at,
           unnest(sqlc.arg(return_url)::text[]) AS return_url,
           unnest(sqlc.arg(key_session_id)::uuid[]) AS key_session_id,
           unnest(sqlc.arg(capture_method)::text[]) AS capture_method,
           unnest(sqlc.arg(claim_request_id)::uuid[]) AS claim_request_id,
           unnest(sqlc.arg(claim_instance)::text[]) AS claim_instance,
           unnest(sqlc.arg(claim_source)::jsonb[]) AS claim_source,
           unnest(sqlc.arg(now)::timestamptz[]) AS now
),
wanted AS (
    SELECT input.id, input.merchant_id, input.idempotency_key, input.fingerprint, nullif(input.provider_key, '') AS provider_key,
           input.amount, input.currency, nullif(input.payment_method, '') AS payment_method,
           nullif(input.order_id, '') AS order_id, nullif(input.description, '') AS description,
           input.locked_until, input.expires_at, nullif(input.return_url, '') AS return_url,
           nullif(input.key_session_id, '00000000-0000-0000-0000-000000000000'::uuid) AS key_session_id,
           nullif(input.capture_method, '') AS capture_method,
           nullif(input.claim_request_id, '00000000-0000-0000-0000-000000000000'::uuid) AS claim_request_id,
           nullif(input.claim_instance, '') AS claim_instance, input.claim_source, input.now
    FROM input
),
claimed AS (
    INSERT INTO charge_attempts (
        id, merchant_id, idempotency_key, fingerprint, provider_key,
        amount, currency, payment_method, order_id, description, locked_until, expires_at,
        return_url, key_session_id, capture_method, claim_request_id, claim_instance, claim_source, created_at
    )
    SELECT w.id, w.merchant_id, w.idempotency_key, w.fingerprint, w.provider_key,
           w.amount, w.currency, w.payment_method, w.order_id, w.description, w.locked_until, w.expires_at,
           w.return_url, w.key_session_id, w.capture_method, w.claim_request_id, w.claim_instance, w.claim_source, w.now
    FROM wanted w
    WHERE NOT EXISTS (
        SELECT 1 FROM charge_attempts t
        WHERE t.merchant_id = w.merchant_id AND t.idempotency_key = w.idempotency_key
          AND t.key_session_id IS NOT DISTINCT FROM w.key_session_id
    )
    AND NOT EXISTS (
        SELECT 1 FROM charges c
        WHERE c.merchant_id = w.merchant_id AND c.order_id = w.order_id
    )
    ON CONFLICT (merchant_id, idempotency_key, key_session_id) DO NOTHING
    RETURNING *
)
SELECT sqlc.embed(a),
       c.provider_charge_id,
       c.created_at AS charge_created_at,
       r.provider_refund_id,
       r.created_at AS refund_created_at,
       r.status AS refund_status,
       r.failure_code AS refund_failure_code,
       r.failure_message AS refund_failure_message,
       false AS claimed
FROM wanted w
JOIN charge_attempts a ON a.merchant_id = w.merchant_id AND a.idempotency_key = w.idempotency_key
  AND a.key_session_id IS NOT DISTINCT FROM w.key_session_id
LEFT JOIN charges c ON c.id = a.charge_id
LEFT JOIN refunds r ON r.id = a.refund_id
UNION ALL
SELECT claimed.*, NULL, NULL, NULL, NULL, NULL, NULL, NULL, true FROM claimed;

-- name: GetChargeAttempt :one
-- Loads an attempt with its charge, for a replay or a status query. Scoped by
-- merchant, so nobody reads another merchant's result, and by the key's
-- scope (key_session_id; NULL: the merchant's own keys).
SELECT sqlc.embed(a),
       c.provider_charge_id,
       c.created_at AS charge_created_at,
       r.provider_refund_id,
       r.created_at AS refund_created_at,
       r.status AS refund_status,
       r.failure_code AS refund_failure_code,
       r.failure_message AS refund_failure_message
FROM charge_attempts a
LEFT JOIN charges c ON c.id = a.charge_id
LEFT JOIN refunds r ON r.id = a.refund_id
WHERE a.merchant_id = @merchant_id AND a.idempotency_key = @idempotency_key
  AND a.key_session_id IS NOT DISTINCT FROM sqlc.narg(key_session_id)::uuid;

-- name: GetPageChargeAttempt :one
-- Loads the newest attempt a checkout page made under a key (among any of
-- the merchant's sessions' keys), for the merchant's server's status query
-- by the key alone, when the key is not among its own.
SELECT sqlc.embed(a),
       c.provider_charge_id,
       c.created_at AS charge_created_at,
       r.provider_refund_id,
       r.created_at AS refund_created_at,
       r.status AS refund_status,
       r.failure_code AS refund_failure_code,
       r.failure_message AS refund_failure_message
FROM charge_attempts a
LEFT JOIN charges c ON c.id = a.charge_id
LEFT JOIN refunds r ON r.id = a.refund_id
WHERE a.merchant_id = @merchant_id AND a.idempotency_key = @idempotency_key AND a.key_session_id IS NOT NULL
ORDER BY a.created_at DESC
LIMIT 1;

-- name: GetChargeAttemptByID :one
-- Loads an attempt by its id, for a provider's word about it (a webhook
-- names the attempt by the id in the payment's metadata).
SELECT sqlc.embed(a),
       c.provider_charge_id,
       c.created_at AS charge_created_at,
       r.provider_refund_id,
       r.created_at AS refund_created_at,
       r.status AS refund_status,
       r.failure_code AS refund_failure_code,
       r.failure_message AS refund_failure_message
FROM charge_attempts a
LEFT JOIN charges c ON c.id = a.charge_id
LEFT JOIN refunds r ON r.id = a.refund_id
WHERE a.id = @id;

-- name: InsertCharge :one
-- Records money that moved (a late charge, in the transaction that records
-- it on its attempt), so a charge never exists without its attempt's result;
-- a late authorization is recorded as one, for its void.
INSERT INTO charges (id, merchant_id, amount, currency, order_id, description, provider_charge_id,
                     capture_method, authorization_expires_at)
VALUES (@id, @merchant_id, @amount, @currency, @order_id, @description, @provider_charge_id,
        coalesce(sqlc.narg(capture_method)::text, 'automatic'), sqlc.narg(authorization_expires_at)::timestamptz)
RETURNING *;

-- name: RecordChargeSucceeded :one
-- Finalizes an attempt as SUCCEEDED with its charge and its
-- charge.succeeded event, in one statement and one round trip: the fenced
-- update, then the charge row and the outbox event (with its id on the
-- relay's queue; the event names the charge, whose row holds what its
-- body would repeat: charge_event_body reads it there), which are written only
-- when the update found the attempt. Fenced on the fence the
-- caller was given: a holder that lost the attempt to someone else writes
-- nothing, and no row comes back. A provider charge recorded already is a
-- unique violation on charges_provider_charge_id_unique, which writes
-- nothing either. The charge and the attempt's completion take the
-- caller's clock, the time the event's body names. A finalization with
-- history rows to write (a takeover's) runs it in a transaction that
-- writes them (payment's inTx): a fresh charge has none, and its statement
-- touches no history table.
WITH done AS (
    UPDATE charge_attempts
    SET status = 'SUCCEEDED',
        charge_id = sqlc.arg(charge_id)::uuid,
        completed_at = sqlc.arg(now)::timestamptz,
        expires_at = sqlc.arg(expires_at)::timestamptz
    WHERE charge_attempts.id = sqlc.arg(id)::uuid AND charge_attempts.status = 'PROCESSING'
      AND charge_attempts.fence = sqlc.arg(fence)::integer
    RETURNING *
),
charge AS (
    INSERT INTO charges (id, merchant_id, amount, currency, order_id, description, provider_charge_id, created_at,
                         capture_method, authorization_expires_at)
    SELECT sqlc.arg(charge_id)::uuid, done.merchant_id, done.amount, done.currency, done.order_id,
           done.description, sqlc.arg(provider_charge_id)::text, sqlc.arg(now)::timestamptz,
           coalesce(done.capture_method, 'automatic'), sqlc.narg(authorization_expires_at)::timestamptz
    FROM done
),
event AS (
    INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, charge_id, body, request_id, occurred_at,
                               traceparent, tracestate)
    SELECT sqlc.arg(event_id)::uuid, 'charge.succeeded', done.merchant_id, done.idempotency_key, done.id,
           sqlc.arg(charge_id)::uuid, sqlc.arg(event_body)::jsonb, sqlc.narg(event_request_id)::uuid, sqlc.arg(now)::timestamptz,
           nullif(sqlc.arg(traceparent)::text, ''), nullif(sqlc.arg(tracestate)::text, '')
    FROM done
    RETURNING id
),
queued AS (
    INSERT INTO charge_events_unsent (event_id) SELECT id FROM event
)
SELECT * FROM done;

-- name: RecordChargesSucceeded :many
-- RecordChargeSucceeded for many plain charges at once (one element of the
-- arrays each): what concurrent requests record while another recording
-- is running goes in one statement and one commit (payment's recorder).
-- Each attempt is fenced on its own fence; one that was finalized or taken
-- over comes back as no row, and the others are recorded. A plain charge:
-- no authorization (capture_method as the attempt's), no trace state
-- written beyond its traceparent's. Any error writes nothing, and the
-- caller records each again on its own (RecordChargeSucceeded), where a
-- provider charge recorded already is its own unique violation.
WITH input AS (
    SELECT unnest(sqlc.arg(id)::uuid[]) AS id,
           unnest(sqlc.arg(fence)::integer[]) AS fence,
           unnest(sqlc.arg(charge_id)::uuid[]) AS charge_id,
           unnest(sqlc.arg(now)::timestamptz[]) AS now,
           unnest(sqlc.arg(expires_at)::timestamptz[]) AS expires_at,
           unnest(sqlc.arg(provider_charge_id)::text[]) AS provider_charge_id,
           unnest(sqlc.arg(event_id)::uuid[]) AS event_id,
           unnest(sqlc.arg(event_body)::jsonb[]) AS event_body,
           unnest(sqlc.arg(event_request_id)::uuid[]) AS event_request_id,
           unnest(sqlc.arg(traceparent)::text[]) AS traceparent,
           unnest(sqlc.arg(tracestate)::text[]) AS tracestate
),
done AS (
    UPDATE charge_attempts
    SET status = 'SUCCEEDED',
        charge_id = input.charge_id,
        completed_at = input.now,
        expires_at = input.expires_at
    FROM input
    WHERE charge_attempts.id = input.id AND charge_attempts.status = 'PROCESSING'
      AND charge_attempts.fence = input.fence
    RETURNING charge_attempts.*
),
recorded AS (
    SELECT done.*, input.now AS recorded_at, input.provider_charge_id AS recorded_provider_charge_id,
           input.event_id, input.event_body, input.event_request_id, input.traceparent AS event_traceparent,
           input.tracestate AS event_tracestate
    FROM done JOIN input ON input.id = done.id
),
charge AS (
    INSERT INTO charges (id, merchant_id, amount, currency, order_id, description, provider_charge_id, created_at,
                         capture_method)
    SELECT recorded.charge_id, recorded.merchant_id, recorded.amount, recorded.currency, recorded.order_id,
           recorded.description, recorded.recorded_provider_charge_id, recorded.recorded_at,
           coalesce(recorded.capture_method, 'automatic')
    FROM recorded
),
event AS (
    INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, charge_id, body, request_id, occurred_at,
                               traceparent, tracestate)
    SELECT recorded.event_id, 'charge.succeeded', recorded.merchant_id, recorded.idempotency_key, recorded.id,
           recorded.charge_id, recorded.event_body,
           nullif(recorded.event_request_id, '00000000-0000-0000-0000-000000000000'::uuid), recorded.recorded_at,
           nullif(recorded.event_traceparent, ''), nullif(recorded.event_tracestate, '')
    FROM recorded
    RETURNING id
),
queued AS (
    INSERT INTO charge_events_unsent (event_id) SELECT id FROM event
)
SELECT * FROM done;

-- name: FailChargeAttempt :one
-- Finalizes an attempt as FAILED with the provider's definitive reason.
-- Fenced like RecordChargeSucceeded; completed at the caller's clock, as
-- every finalization is.
UPDATE charge_attempts
SET status = 'FAILED',
    failure_code = sqlc.arg(failure_code)::text,
    failure_message = sqlc.arg(failure_message)::text,
    completed_at = sqlc.arg(now)::timestamptz,
    expires_at = sqlc.arg(expires_at)::timestamptz
WHERE id = @id AND status = 'PROCESSING' AND fence = @fence
RETURNING *;

-- name: RekeyChargeAttempt :one
-- Gives an attempt a new provider key, when the provider has spent the old
-- one (it replays a failure for every send under it) and holds no charge for
-- the attempt. Written before anything is sent under the new key, so that
-- whoever holds the attempt next asks about, and sends under, the new key.
-- Fenced on the fence and on the old key: a holder that lost the
-- attempt, or whose key is stale, changes nothing (a row keeps NULL for
-- the first key: charge_attempt_provider_key, 00038).
UPDATE charge_attempts
SET provider_key = sqlc.arg(new_provider_key)::text
WHERE id = @id AND status = 'PROCESSING' AND fence = @fence
  AND charge_attempt_provider_key(charge_attempts) = sqlc.arg(old_provider_key)::text
RETURNING *;

-- name: AwaitChargeAttemptAction :one
-- Records that an attempt waits for the shopper to authenticate at the
-- provider's next_action_url: the first time, since when (the window
-- counts from there). The holder's lease ends with it: nobody works on an
-- attempt while the shopper authenticates, and locked_until becomes the
-- reconciler's next look at it. Fenced like the finalizing writes.
UPDATE charge_attempts
SET next_action_url = sqlc.arg(next_action_url)::text,
    action_since = coalesce(action_since, sqlc.arg(now)::timestamptz),
    action_checked_at = sqlc.arg(now)::timestamptz,
    locked_until = sqlc.arg(next_check)::timestamptz
WHERE id = @id AND status = 'PROCESSING' AND fence = @fence
RETURNING *;

-- name: TakeActionCheck :one
-- A retry's or a poll's turn to read the provider about an attempt that
-- waits for the shopper, at most one per interval (checked_before) across
-- instances, so that a page polling, or many, cannot flood the provider.
-- It takes nothing else: no lease, no fence. A read changes
-- nothing at the provider, and what it learns is recorded fenced on the
-- fence as it is.
UPDATE charge_attempts
SET action_checked_at = sqlc.arg(now)::timestamptz
WHERE id = @id AND status = 'PROCESSING' AND action_checked_at <= sqlc.arg(checked_before)::timestamptz
RETURNING *;

-- name: ReleaseChargeAttempt :one
-- Releases the holder's lease early, when it leaves the outcome unknown or
-- cannot know whether its claim committed: the attempt is stuck at once, so
-- that the reconciler or the client's retry takes it over instead of
-- waiting for the lease to run out. Fenced like the finalizing writes.
-- Its history row (the provider call lost, the release) rides with it.
WITH released AS (
    UPDATE charge_attempts
    SET locked_until = sqlc.arg(now)::timestamptz
    WHERE charge_attempts.id = sqlc.arg(id)::uuid AND charge_attempts.status = 'PROCESSING'
      AND charge_attempts.fence = sqlc.arg(fence)::integer
    RETURNING *
),
history AS (
    -- Its history row (history.Entry as JSON), written with it.
    INSERT INTO attempt_history (attempt_id, at, request_id, trace_id, span_id, instance, entries)
    SELECT released.id, sqlc.arg(h_at)::timestamptz, nullif(sqlc.arg(h_request_id)::text, ''),
           nullif(sqlc.arg(h_trace_id)::text, ''), nullif(sqlc.arg(h_span_id)::text, ''),
           nullif(sqlc.arg(h_instance)::text, ''), sqlc.arg(h_entries)::jsonb
    FROM released
    WHERE jsonb_array_length(sqlc.arg(h_entries)::jsonb) > 0
)
SELECT count(*) FROM released;

-- name: TakeStuckChargeAttempts :many
-- The reconciler's takeover of stuck attempts, PROCESSING with their lease
-- ended: each gets a new lease and a new fence, which fences off
-- any earlier holder.
-- SKIP LOCKED lets several reconcilers run at once without ever taking the
-- same attempt. completed_at IS NULL (the same rows as PROCESSING) is the
-- lease index's predicate: the scans of attempts in flight name it, the
-- fenced writes by id do not, and so read their row by the primary key.
WITH taken AS (
    UPDATE charge_attempts
    SET fence = fence + 1,
        locked_until = sqlc.arg(locked_until)::timestamptz
    WHERE id IN (
        SELECT id FROM charge_attempts
        WHERE status = 'PROCESSING' AND completed_at IS NULL AND charge_attempts.locked_until < sqlc.arg(now)::timestamptz
        ORDER BY charge_attempts.locked_until
        LIMIT sqlc.arg(max_attempts)::integer
        FOR UPDATE SKIP LOCKED
    )
    RETURNING *
),
history AS (
    -- The history of each attempt taken: its lease ended (when, from the
    -- row as it was before this statement), and who took it over. A look
    -- at an attempt that waits (for the shopper, or the provider) is the
    -- reconciler's routine, not a change of holder.
    INSERT INTO attempt_history (attempt_id, at, request_id, trace_id, span_id, instance, entries)
    SELECT t.id, least(old.locked_until, sqlc.arg(now)::timestamptz), nullif(sqlc.arg(h_request_id)::text, ''),
           nullif(sqlc.arg(h_trace_id)::text, ''), nullif(sqlc.arg(h_span_id)::text, ''),
           nullif(sqlc.arg(h_instance)::text, ''),
           jsonb_build_array(
               jsonb_build_object('at', least(old.locked_until, sqlc.arg(now)::timestamptz), 'type', 'lease.ended',
                                  'detail', 'holder ' || old.fence || ' ended without finishing'),
               jsonb_build_object('at', sqlc.arg(now)::timestamptz, 'type', 'lease.taken_over',
                                  'detail', 'by the reconciler: holder ' || t.fence))
    FROM taken t
    JOIN charge_attempts old ON old.id = t.id
    WHERE old.next_action_url IS NULL AND old.pending_since IS NULL
)
SELECT * FROM taken;

-- name: TakeOverChargeAttempt :one
-- A retry's takeover of one stuck attempt: PROCESSING with its lease ended
-- or released (its holder died, left the outcome unknown, or never learned
-- that its claim committed). Like the reconciler's takeover
-- it bumps the fence, which fences off any earlier holder, and of
-- several concurrent retries exactly one gets the row.
WITH taken AS (
    UPDATE charge_attempts
    SET fence = fence + 1,
        locked_until = sqlc.arg(locked_until)::timestamptz
    WHERE charge_attempts.id = sqlc.arg(id)::uuid AND charge_attempts.status = 'PROCESSING'
      AND charge_attempts.locked_until < sqlc.arg(now)::timestamptz
    RETURNING *
),
history AS (
    -- The history of each attempt taken: its lease ended (when, from the
    -- row as it was before this statement), and who took it over. A look
    -- at an attempt that waits (for the shopper, or the provider) is the
    -- reconciler's routine, not a change of holder.
    INSERT INTO attempt_history (attempt_id, at, request_id, trace_id, span_id, instance, entries)
    SELECT t.id, least(old.locked_until, sqlc.arg(now)::timestamptz), nullif(sqlc.arg(h_request_id)::text, ''),
           nullif(sqlc.arg(h_trace_id)::text, ''), nullif(sqlc.arg(h_span_id)::text, ''),
           nullif(sqlc.arg(h_instance)::text, ''),
           jsonb_build_array(
               jsonb_build_object('at', least(old.locked_until, sqlc.arg(now)::timestamptz), 'type', 'lease.ended',
                                  'detail', 'holder ' || old.fence || ' ended without finishing'),
               jsonb_build_object('at', sqlc.arg(now)::timestamptz, 'type', 'lease.taken_over',
                                  'detail', 'by a retry: holder ' || t.fence))
    FROM taken t
    JOIN charge_attempts old ON old.id = t.id
    WHERE old.next_action_url IS NULL AND old.pending_since IS NULL
)
SELECT * FROM taken;

-- name: CountStuckChargeAttempts :one
-- For the stuck-attempts gauge: PROCESSING attempts whose lease has ended,
-- but for those that wait for the shopper (their own gauge): between two
-- looks of the reconciler nobody holds them, by design.
SELECT count(*) FROM charge_attempts
WHERE status = 'PROCESSING' AND completed_at IS NULL AND locked_until < sqlc.arg(now)::timestamptz
  AND next_action_url IS NULL AND pending_since IS NULL;

-- name: CountWaitingChargeAttempts :one
-- For the waiting-attempts gauge: PROCESSING attempts that wait for the
-- shopper to authenticate.
SELECT count(*) FROM charge_attempts
WHERE status = 'PROCESSING' AND completed_at IS NULL AND next_action_url IS NOT NULL;

-- name: ListStuckChargeAttempts :many
-- For operators: stuck attempts, PROCESSING with their lease ended, oldest
-- first.
SELECT a.*, m.name AS merchant_name
FROM charge_attempts a
JOIN merchants m ON m.id = a.merchant_id
WHERE a.status = 'PROCESSING' AND a.completed_at IS NULL AND a.locked_until < sqlc.arg(now)::timestamptz
  AND a.next_action_url IS NULL AND a.pending_since IS NULL
ORDER BY a.created_at
LIMIT sqlc.arg(max_attempts)::integer;

-- name: DeleteExpiredChargeAttempts :one
-- Retention: forgets a small batch of finished attempts whose stored result
-- has expired, with their history and stored answers. Never a PROCESSING one. SKIP LOCKED
-- keeps it from waiting on, or blocking, anything else; the charges stay.
-- An attempt's result expires a retention after it was claimed or later
-- (expires_at is set at the claim and again at the outcome, each time to
-- a retention ahead), so every expired one was made before now less the
-- retention: its id is below that time's (before_id; ids are
-- time-ordered). The scan reads the primary key up to there, oldest first,
-- and no index names expires_at or status, which the outcome's update
-- changes.
WITH gone AS (
    DELETE FROM charge_attempts
    WHERE id IN (
        SELECT id FROM charge_attempts
        WHERE id < sqlc.arg(before_id)::uuid AND status <> 'PROCESSING' AND expires_at < sqlc.arg(now)::timestamptz
        ORDER BY id
        LIMIT sqlc.arg(max_attempts)::integer
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id
),
forgotten AS (
    DELETE FROM attempt_history WHERE attempt_id IN (SELECT id FROM gone)
),
uncounted AS (
    DELETE FROM attempt_counts WHERE attempt_id IN (SELECT id FROM gone)
),
unanswered AS (
    DELETE FROM stored_answers WHERE attempt_id IN (SELECT id FROM gone)
)
SELECT count(*) FROM gone;

-- name: OrderIsPaid :one
-- Whether the merchant's order already has a charge.
SELECT EXISTS (
    SELECT 1 FROM charges WHERE merchant_id = @merchant_id AND order_id = @order_id
);

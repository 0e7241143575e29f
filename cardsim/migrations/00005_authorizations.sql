-- +goose Up
-- Authorize now, capture later, as Stripe's manual capture: a charge made
-- with capture_method manual only authorizes. Once it succeeded (at once,
-- or when its shopper authenticated) its authorization is open until
-- authorization_expires_at: captures take part or all of it (amount_captured
-- is their sum; a final one releases the rest), or a void releases all of
-- it. An open authorization whose time has passed is expired: a read makes
-- it so (one conditional update, as refunds settle), and a capture or void
-- that holds the charge's row decides before or after it, never both.
ALTER TABLE cardsim.charges ADD COLUMN capture_method text NOT NULL DEFAULT 'automatic';
-- open, captured (in full, or its final capture made), voided or expired;
-- NULL for a charge that is no authorization (automatic, or not succeeded).
ALTER TABLE cardsim.charges ADD COLUMN authorization_status text;
ALTER TABLE cardsim.charges ADD COLUMN authorization_expires_at timestamptz;
ALTER TABLE cardsim.charges ADD COLUMN amount_captured bigint NOT NULL DEFAULT 0;
ALTER TABLE cardsim.charges ADD CONSTRAINT charges_capture_method_check
    CHECK (capture_method IN ('automatic', 'manual'));
ALTER TABLE cardsim.charges ADD CONSTRAINT charges_authorization_check
    CHECK ((authorization_status IS NULL) = (authorization_expires_at IS NULL)
           AND (authorization_status IS NULL
                OR (capture_method = 'manual' AND status = 'succeeded'
                    AND authorization_status IN ('open', 'captured', 'voided', 'expired'))));
-- The last guard of captures: whatever interleaves, never more than was
-- authorized, and nothing of a void.
ALTER TABLE cardsim.charges ADD CONSTRAINT charges_amount_captured_check
    CHECK (amount_captured >= 0 AND amount_captured <= amount
           AND (amount_captured = 0 OR authorization_status IN ('open', 'captured', 'expired')));
-- The authorizations that a read may find expired.
CREATE INDEX cardsim_charges_authorization_open_idx ON cardsim.charges (authorization_expires_at)
    WHERE authorization_status = 'open';

-- A capture of an authorization, once per idempotency key. Only the
-- captures that were made (or that the card declined) are stored: one the
-- authorization refused (expired, voided, too large) is decided anew.
CREATE TABLE cardsim.captures (
    id               text NOT NULL,
    charge_id        text NOT NULL,
    -- The caller's idempotency key (chargeonce's provider key): one capture per key.
    idempotency_key  text NOT NULL,
    -- SHA-256 of the request parameters, to refuse a reused key with other parameters.
    request_hash     bytea NOT NULL,
    amount           bigint NOT NULL,
    currency         text NOT NULL,
    -- A final capture releases what it leaves of the authorization.
    final            boolean NOT NULL,
    status           text NOT NULL,
    failure_code     text,
    failure_message  text,
    metadata         jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT captures_pkey PRIMARY KEY (id),
    CONSTRAINT captures_charge_id_fkey FOREIGN KEY (charge_id) REFERENCES cardsim.charges (id),
    CONSTRAINT captures_idempotency_key_key UNIQUE (idempotency_key),
    CONSTRAINT captures_amount_check CHECK (amount > 0),
    CONSTRAINT captures_status_check CHECK (status IN ('succeeded', 'failed')),
    CONSTRAINT captures_failure_check CHECK ((status = 'failed') = (failure_code IS NOT NULL))
);
-- A charge's captures: GET /v1/captures?charge=.
CREATE INDEX cardsim_captures_charge_id_idx ON cardsim.captures (charge_id, created_at);
-- Lists captures newest first.
CREATE INDEX cardsim_captures_created_at_idx ON cardsim.captures (created_at);
-- A capture found by the attempt that chargeonce names in its metadata,
-- whatever the key it was sent under.
CREATE INDEX cardsim_captures_attempt_idx ON cardsim.captures ((metadata ->> 'chargeonce_attempt_id'));

-- The void of an authorization, once per idempotency key; only one that
-- was made is stored.
CREATE TABLE cardsim.voids (
    id               text NOT NULL,
    charge_id        text NOT NULL,
    idempotency_key  text NOT NULL,
    request_hash     bytea NOT NULL,
    metadata         jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT voids_pkey PRIMARY KEY (id),
    CONSTRAINT voids_charge_id_fkey FOREIGN KEY (charge_id) REFERENCES cardsim.charges (id),
    CONSTRAINT voids_idempotency_key_key UNIQUE (idempotency_key),
    -- An authorization is voided once.
    CONSTRAINT voids_charge_id_key UNIQUE (charge_id)
);
CREATE INDEX cardsim_voids_created_at_idx ON cardsim.voids (created_at);
CREATE INDEX cardsim_voids_attempt_idx ON cardsim.voids ((metadata ->> 'chargeonce_attempt_id'));

-- +goose Down
DROP TABLE cardsim.voids;
DROP TABLE cardsim.captures;
-- Authorizations do not fit the schema of before: they go, with their
-- refunds.
DELETE FROM cardsim.refunds WHERE charge_id IN (SELECT id FROM cardsim.charges WHERE capture_method = 'manual');
DELETE FROM cardsim.charges WHERE capture_method = 'manual';
DROP INDEX cardsim.cardsim_charges_authorization_open_idx;
ALTER TABLE cardsim.charges DROP CONSTRAINT charges_amount_captured_check;
ALTER TABLE cardsim.charges DROP CONSTRAINT charges_authorization_check;
ALTER TABLE cardsim.charges DROP CONSTRAINT charges_capture_method_check;
ALTER TABLE cardsim.charges DROP COLUMN amount_captured;
ALTER TABLE cardsim.charges DROP COLUMN authorization_expires_at;
ALTER TABLE cardsim.charges DROP COLUMN authorization_status;
ALTER TABLE cardsim.charges DROP COLUMN capture_method;

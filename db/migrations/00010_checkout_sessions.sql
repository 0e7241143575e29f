-- +goose Up
-- Two kinds of API key. A secret key (co_sk_...) belongs on the merchant's
-- server and may run every operation. A publishable key (co_pk_...) may sit
-- in a checkout page: alone it grants nothing, and with a checkout
-- session's client secret it may pay that session and read its attempts.
ALTER TABLE api_keys ADD COLUMN kind text NOT NULL DEFAULT 'secret'
    CONSTRAINT api_keys_kind_check CHECK (kind IN ('secret', 'publishable'));

-- The origins (scheme://host[:port], as a browser sends them) a merchant's
-- checkout pages run on: cross-origin requests with a publishable key are
-- served to these only.
CREATE TABLE merchant_origins (
    merchant_id uuid NOT NULL REFERENCES merchants (id) ON DELETE CASCADE,
    origin      text NOT NULL CHECK (origin ~ '^https?://[^/?#]+$'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, origin)
);
-- A preflight names only its origin: is it any merchant's?
CREATE INDEX merchant_origins_origin_idx ON merchant_origins (origin);

-- A checkout session: what the merchant's server fixed to be paid, which a
-- browser may pay with a publishable key and the session's client secret.
-- Created idempotently on (merchant_id, idempotency_key), a namespace of
-- its own. The client secret is stored as its SHA-256 only.
CREATE TABLE checkout_sessions (
    id                 uuid PRIMARY KEY,
    merchant_id        uuid NOT NULL REFERENCES merchants (id),
    idempotency_key    text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    -- SHA-256 of the canonical creating request: the same key with another
    -- request is refused.
    fingerprint        bytea NOT NULL,
    client_secret_hash bytea NOT NULL,
    amount             bigint NOT NULL CHECK (amount > 0),
    currency           text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    order_id           text,
    description        text,
    return_url         text,
    status             text NOT NULL DEFAULT 'OPEN' CHECK (status IN ('OPEN', 'PAID', 'EXPIRED')),
    -- Charge attempts claimed on the session, retries of a key not counted;
    -- at SESSION_MAX_ATTEMPTS the session takes no more.
    attempts           integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    charge_id          uuid REFERENCES charges (id),
    created_at         timestamptz NOT NULL,
    expires_at         timestamptz NOT NULL,
    closed_at          timestamptz,
    CHECK ((status = 'PAID') = (charge_id IS NOT NULL)),
    CHECK ((status = 'OPEN') = (closed_at IS NULL))
);
CREATE UNIQUE INDEX checkout_sessions_merchant_key_idx ON checkout_sessions (merchant_id, idempotency_key);
-- One open session per order.
CREATE UNIQUE INDEX checkout_sessions_open_order_idx ON checkout_sessions (merchant_id, order_id)
    WHERE order_id IS NOT NULL AND status = 'OPEN';
-- The expiry sweep's way in: open sessions by expiry.
CREATE INDEX checkout_sessions_open_idx ON checkout_sessions (expires_at) WHERE status = 'OPEN';

-- An attempt made on a session. One session, one payment: at most one
-- attempt per session that is running or succeeded; a decline frees the
-- session for another try (as for orders, migration 00004).
ALTER TABLE charge_attempts ADD COLUMN checkout_session_id uuid REFERENCES checkout_sessions (id);
CREATE UNIQUE INDEX charge_attempts_session_idx ON charge_attempts (checkout_session_id)
    WHERE checkout_session_id IS NOT NULL AND status <> 'FAILED';

-- The outbox carries the sessions' events too: checkout_session.paid (in
-- the transaction that records the charge) and checkout_session.expired.
-- A session's event names the session, not an attempt, and each happens at
-- most once per session.
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'checkout_session.paid', 'checkout_session.expired'));
ALTER TABLE charge_events ALTER COLUMN attempt_id DROP NOT NULL;
ALTER TABLE charge_events ADD COLUMN checkout_session_id uuid;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_subject_check
    CHECK ((attempt_id IS NULL) = (type LIKE 'checkout\_session.%') AND (attempt_id IS NOT NULL OR checkout_session_id IS NOT NULL));
CREATE UNIQUE INDEX charge_events_session_idx ON charge_events (checkout_session_id, type) WHERE attempt_id IS NULL;

-- +goose Down
DROP INDEX charge_events_session_idx;
ALTER TABLE charge_events DROP CONSTRAINT charge_events_subject_check;
DELETE FROM charge_events WHERE attempt_id IS NULL;
ALTER TABLE charge_events DROP COLUMN checkout_session_id;
ALTER TABLE charge_events ALTER COLUMN attempt_id SET NOT NULL;
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN ('charge.succeeded', 'charge.failed'));
DROP INDEX charge_attempts_session_idx;
ALTER TABLE charge_attempts DROP COLUMN checkout_session_id;
DROP TABLE checkout_sessions;
DROP TABLE merchant_origins;
ALTER TABLE api_keys DROP COLUMN kind;

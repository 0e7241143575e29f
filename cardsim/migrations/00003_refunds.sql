-- +goose Up
-- Refunds, as Stripe makes them: money of a succeeded charge given back, in
-- one refund or several, never more in all than the charge's amount. A
-- refund becomes settles_to at settles_at, pending until then: a refund
-- final at once settles when it is made. A read makes the refunds that are
-- due final (one conditional update), so nothing runs in the background. A
-- refund that succeeded may still fail later (a closed card). The refunds
-- that are pending or succeeded hold their amount against the charge's; a
-- failed one gives it back.
CREATE TABLE cardsim.refunds (
    id               text NOT NULL,
    charge_id        text NOT NULL,
    -- The caller's idempotency key (chargeonce's provider key): one refund per key.
    idempotency_key  text NOT NULL,
    -- SHA-256 of the request parameters, to refuse a reused key with other parameters.
    request_hash     bytea NOT NULL,
    amount           bigint NOT NULL,
    currency         text NOT NULL,
    reason           text,
    status           text NOT NULL,
    failure_code     text,
    failure_message  text,
    metadata         jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    settles_at       timestamptz NOT NULL,
    settles_to       text NOT NULL,
    CONSTRAINT refunds_pkey PRIMARY KEY (id),
    CONSTRAINT refunds_charge_id_fkey FOREIGN KEY (charge_id) REFERENCES cardsim.charges (id),
    -- The insert of a refund relies on it: ON CONFLICT (idempotency_key).
    CONSTRAINT refunds_idempotency_key_key UNIQUE (idempotency_key),
    CONSTRAINT refunds_amount_check CHECK (amount > 0),
    CONSTRAINT refunds_status_check CHECK (status IN ('pending', 'succeeded', 'failed')),
    CONSTRAINT refunds_failure_check CHECK ((status = 'failed') = (failure_code IS NOT NULL)),
    CONSTRAINT refunds_settles_check CHECK (settles_to IN ('succeeded', 'failed') AND settles_at >= created_at)
);
-- A charge's refunds: the sums held against it, and GET /v1/refunds?charge=.
CREATE INDEX cardsim_refunds_charge_id_idx ON cardsim.refunds (charge_id, created_at);
-- Lists refunds newest first.
CREATE INDEX cardsim_refunds_created_at_idx ON cardsim.refunds (created_at);
-- The refunds that a read may find due.
CREATE INDEX cardsim_refunds_pending_idx ON cardsim.refunds (settles_at) WHERE status = 'pending';

-- +goose Down
DROP TABLE cardsim.refunds;

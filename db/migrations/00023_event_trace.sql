-- +goose Up
-- One trace per payment: the W3C trace context of the request (or pass)
-- that wrote an event travels with it, from the outbox row to the stream's
-- message headers and from there to each webhook delivery, whose attempts
-- send it as traceparent, so that a merchant's handler joins the
-- checkout's trace. NULL: written outside any trace.
ALTER TABLE charge_events ADD COLUMN traceparent text;
ALTER TABLE charge_events ADD COLUMN tracestate text;
ALTER TABLE webhook_deliveries ADD COLUMN traceparent text;
ALTER TABLE webhook_deliveries ADD COLUMN tracestate text;

-- +goose Down
ALTER TABLE webhook_deliveries DROP COLUMN tracestate;
ALTER TABLE webhook_deliveries DROP COLUMN traceparent;
ALTER TABLE charge_events DROP COLUMN tracestate;
ALTER TABLE charge_events DROP COLUMN traceparent;

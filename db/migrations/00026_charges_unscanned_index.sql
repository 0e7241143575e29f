-- +goose Up
-- No query reads charges by merchant and creation time: each reads a
-- charge by its id (charges_pkey), its provider charge id
-- (charges_provider_charge_id_unique), its order (charges_order_idx) or its
-- open authorization (charges_open_authorizations_idx). The index was
-- never scanned, and cost every charge an entry. docs/performance.md lists each
-- index and the query that scans it.
DROP INDEX charges_merchant_id_created_at_idx;

-- +goose Down
CREATE INDEX charges_merchant_id_created_at_idx ON charges (merchant_id, created_at);

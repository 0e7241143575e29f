-- +goose Up
-- Who claimed an attempt: the request, its trace and span, and the
-- instance (history.Source as JSON), kept on the attempt's own row, which
-- the claim writes anyway. The history reads a claim from it (and the
-- reconciler the span it links back to), as it reads the rest of a fresh
-- charge from the ledger: a claim costs no row, no index entry and no
-- write of its own. Measured against a history row per claim, that row
-- was what a fresh charge's history cost PostgreSQL (docs/performance.md).
ALTER TABLE charge_attempts ADD COLUMN claim_source jsonb;

-- The claims recorded as history rows until now move to their attempts.
UPDATE charge_attempts a
SET claim_source = jsonb_strip_nulls(jsonb_build_object(
        'request_id', h.request_id, 'trace_id', h.trace_id, 'span_id', h.span_id, 'instance', h.instance))
FROM attempt_history h
WHERE h.attempt_id = a.id AND h.entries @> '[{"type": "request.claimed"}]';
UPDATE attempt_history
SET entries = coalesce((SELECT jsonb_agg(e ORDER BY n) FROM jsonb_array_elements(entries) WITH ORDINALITY AS x(e, n)
                        WHERE e->>'type' <> 'request.claimed'), '[]'::jsonb)
WHERE entries @> '[{"type": "request.claimed"}]';
DELETE FROM attempt_history WHERE entries = '[]'::jsonb;

-- +goose Down
-- The claims are not written back as rows: the history reads them from
-- the attempts, which this keeps.
ALTER TABLE charge_attempts DROP COLUMN claim_source;

-- +goose Up
-- A websocket or an event stream opened from a merchant's checkout page
-- stays open only while the page's origin is registered: every server
-- checks its open streams again when it hears of a change on
-- chargeonce_api_keys (graph.Streams), so a change of origins notifies
-- there too, with the same empty payload (it also empties the servers'
-- caches of authentications, which origins change too rarely to matter).
CREATE TRIGGER merchant_origins_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON merchant_origins
    FOR EACH STATEMENT EXECUTE FUNCTION api_keys_notify();

-- +goose Down
DROP TRIGGER merchant_origins_notify ON merchant_origins;

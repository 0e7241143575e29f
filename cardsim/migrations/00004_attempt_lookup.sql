-- +goose Up
-- A lookup by the attempt, whatever the key it was sent under: chargeonce
-- names its attempt in every charge's metadata (chargeonce_attempt_id), and
-- reads the provider by it to find a charge made twice for one attempt.
CREATE INDEX cardsim_charges_attempt_idx ON cardsim.charges ((metadata ->> 'chargeonce_attempt_id'));

-- +goose Down
DROP INDEX cardsim.cardsim_charges_attempt_idx;

package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/sqlc"
)

// store is the one seam between the domain and PostgreSQL: it runs the sqlc
// queries and turns pgx errors into domain errors. Nothing above it imports pgx.
type store struct {
	pool *pgxpool.Pool
	q    *sqlc.Queries
}

func newStore(pool *pgxpool.Pool) *store {
	return &store{pool: pool, q: sqlc.New(pool)}
}

// Constraints the store tells apart, by the names the migrations give them.
const (
	constraintProviderChargeID = "charges_provider_charge_id_unique" // one charge row per provider charge
	constraintAttemptOrder     = "charge_attempts_order_idx"         // one live attempt per order
	constraintChargeOrder      = "charges_order_idx"                 // one charge per order
)

// errOrderPaid refuses a second payment of an order; errFenced is a
// finalizing write that found the attempt already finalized or taken over.
var (
	errOrderPaid = &Error{Code: EORDERPAID, Field: "input.orderId",
		Message: "this order is already paid, or being paid, under another idempotency key; nothing was charged"}
	errFenced = errors.New("attempt was finalized or taken over by someone else")
)

// interpretError is the store's seam: it turns a database error into the
// domain's (see DBError), and a second live attempt or charge for an order
// into errOrderPaid.
func interpretError(err error) error {
	if kind, constraint := db.Classify(err); kind == db.UniqueViolation {
		if constraint == constraintAttemptOrder || constraint == constraintChargeOrder {
			return errOrderPaid
		}
		return fmt.Errorf("unique violation on %s: %w", constraint, err)
	}
	return DBError(err)
}

func (s *store) merchant(ctx context.Context, id uuid.UUID) (Merchant, error) {
	m, err := s.q.GetMerchant(ctx, id)
	return Merchant{ID: m.ID, Name: m.Name}, interpretError(err)
}

func (s *store) upsertMerchant(ctx context.Context, name string) (Merchant, error) {
	m, err := s.q.UpsertMerchant(ctx, sqlc.UpsertMerchantParams{ID: uuid.New(), Name: name})
	return Merchant{ID: m.ID, Name: m.Name}, interpretError(err)
}

func (s *store) merchantByName(ctx context.Context, name string) (Merchant, error) {
	m, err := s.q.GetMerchantByName(ctx, name)
	return Merchant{ID: m.ID, Name: m.Name}, interpretError(err)
}

// insertAPIKey stores a key's hash and prefix under id; for a hash that is
// stored already it only corrects the prefix.
func (s *store) insertAPIKey(ctx context.Context, id, merchantID uuid.UUID, hash []byte, prefix string, developmentOnly bool) error {
	return interpretError(s.q.InsertAPIKey(ctx, sqlc.InsertAPIKeyParams{
		ID: id, MerchantID: merchantID, KeyHash: hash, KeyPrefix: prefix, DevelopmentOnly: developmentOnly,
	}))
}

// apiKeyCandidate is a live key that may be the one a request presents.
type apiKeyCandidate struct {
	hash     []byte
	merchant Merchant
}

// apiKeyCandidates returns the live keys with prefix, development-only ones
// only if allowDevelopmentOnly.
func (s *store) apiKeyCandidates(ctx context.Context, prefix string, allowDevelopmentOnly bool) ([]apiKeyCandidate, error) {
	rows, err := s.q.ListAPIKeyCandidates(ctx, sqlc.ListAPIKeyCandidatesParams{KeyPrefix: prefix, AllowDevelopmentOnly: allowDevelopmentOnly})
	cs := make([]apiKeyCandidate, len(rows))
	for i, r := range rows {
		cs[i] = apiKeyCandidate{hash: r.KeyHash, merchant: Merchant{ID: r.MerchantID, Name: r.MerchantName}}
	}
	return cs, interpretError(err)
}

func (s *store) apiKeys(ctx context.Context) ([]APIKey, error) {
	rows, err := s.q.ListAPIKeys(ctx)
	return apiKeysFromRows(rows), interpretError(err)
}

func (s *store) liveAPIKeysOfMerchant(ctx context.Context, merchantID uuid.UUID) ([]APIKey, error) {
	rows, err := s.q.ListLiveAPIKeysOfMerchant(ctx, merchantID)
	return apiKeysFromRows(rows), interpretError(err)
}

func (s *store) liveAPIKeysByPrefix(ctx context.Context, prefix string) ([]APIKey, error) {
	rows, err := s.q.ListLiveAPIKeysByPrefix(ctx, prefix)
	return apiKeysFromRows(rows), interpretError(err)
}

func (s *store) apiKey(ctx context.Context, id uuid.UUID) (APIKey, error) {
	r, err := s.q.GetAPIKey(ctx, id)
	return apiKeyFromRow(r), interpretError(err)
}

// revokeAPIKey revokes the live key id; errNotFound if it is unknown or
// already revoked.
func (s *store) revokeAPIKey(ctx context.Context, id uuid.UUID) (APIKey, error) {
	r, err := s.q.RevokeAPIKey(ctx, id)
	return apiKeyFromRow(r), interpretError(err)
}

// apiKeyRow is the shape of every key row the queries above return; sqlc
// generates one type of it per query.
type apiKeyRow interface {
	~struct {
		ID              uuid.UUID
		MerchantName    string
		KeyPrefix       string
		DevelopmentOnly bool
		CreatedAt       time.Time
		RevokedAt       *time.Time
	}
}

func apiKeyFromRow[R apiKeyRow](row R) APIKey {
	r := sqlc.ListAPIKeysRow(row)
	return APIKey{
		ID: r.ID, Merchant: r.MerchantName, Prefix: r.KeyPrefix,
		DevelopmentOnly: r.DevelopmentOnly, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt,
	}
}

func apiKeysFromRows[R apiKeyRow](rows []R) []APIKey {
	keys := make([]APIKey, len(rows))
	for i, r := range rows {
		keys[i] = apiKeyFromRow(r)
	}
	return keys
}

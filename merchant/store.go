package merchant

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/payment"
	"chargeonce/sqlc"
)

// store is the seam between the merchants and PostgreSQL: it runs the sqlc
// queries of merchants and API keys, and returns the domain's errors
// (payment.DBError). It is the package's only code that knows sqlc.
type store struct {
	pool *pgxpool.Pool
	q    *sqlc.Queries
}

func newStore(pool *pgxpool.Pool) *store {
	return &store{pool: pool, q: sqlc.New(pool)}
}

func (s *store) upsertMerchant(ctx context.Context, name string) (payment.Merchant, error) {
	m, err := s.q.UpsertMerchant(ctx, sqlc.UpsertMerchantParams{ID: uuid.New(), Name: name})
	return payment.Merchant{ID: m.ID, Name: m.Name}, payment.DBError(err)
}

func (s *store) merchantByName(ctx context.Context, name string) (payment.Merchant, error) {
	m, err := s.q.GetMerchantByName(ctx, name)
	return payment.Merchant{ID: m.ID, Name: m.Name}, payment.DBError(err)
}

// insertAPIKey stores a key's hash and prefix under id; for a hash that is
// stored already it only corrects the prefix.
func (s *store) insertAPIKey(ctx context.Context, id, merchantID uuid.UUID, hash []byte, prefix string, kind KeyKind, developmentOnly bool) error {
	return payment.DBError(s.q.InsertAPIKey(ctx, sqlc.InsertAPIKeyParams{
		ID: id, MerchantID: merchantID, KeyHash: hash, KeyPrefix: prefix, DevelopmentOnly: developmentOnly, Kind: string(kind),
	}))
}

// apiKeyCandidate is a live key that may be the one a request presents.
type apiKeyCandidate struct {
	hash   []byte
	caller Caller
}

// apiKeyCandidates returns the live keys with prefix, development-only ones
// only if allowDevelopmentOnly.
func (s *store) apiKeyCandidates(ctx context.Context, prefix string, allowDevelopmentOnly bool) ([]apiKeyCandidate, error) {
	rows, err := s.q.ListAPIKeyCandidates(ctx, sqlc.ListAPIKeyCandidatesParams{KeyPrefix: prefix, AllowDevelopmentOnly: allowDevelopmentOnly})
	cs := make([]apiKeyCandidate, len(rows))
	for i, r := range rows {
		cs[i] = apiKeyCandidate{hash: r.KeyHash, caller: Caller{
			Merchant: payment.Merchant{ID: r.MerchantID, Name: r.MerchantName}, KeyID: r.ID, Kind: KeyKind(r.Kind),
		}}
	}
	return cs, payment.DBError(err)
}

func (s *store) apiKeys(ctx context.Context) ([]APIKey, error) {
	rows, err := s.q.ListAPIKeys(ctx)
	return apiKeysFromRows(rows), payment.DBError(err)
}

func (s *store) liveAPIKeysOfMerchant(ctx context.Context, merchantID uuid.UUID) ([]APIKey, error) {
	rows, err := s.q.ListLiveAPIKeysOfMerchant(ctx, merchantID)
	return apiKeysFromRows(rows), payment.DBError(err)
}

func (s *store) liveAPIKeysByPrefix(ctx context.Context, prefix string) ([]APIKey, error) {
	rows, err := s.q.ListLiveAPIKeysByPrefix(ctx, prefix)
	return apiKeysFromRows(rows), payment.DBError(err)
}

func (s *store) apiKey(ctx context.Context, id uuid.UUID) (APIKey, error) {
	r, err := s.q.GetAPIKey(ctx, id)
	return apiKeyFromRow(r), payment.DBError(err)
}

// revokeAPIKey revokes the live key id; errNotFound if it is unknown or
// already revoked.
func (s *store) revokeAPIKey(ctx context.Context, id uuid.UUID) (APIKey, error) {
	r, err := s.q.RevokeAPIKey(ctx, id)
	return apiKeyFromRow(r), payment.DBError(err)
}

// apiKeyRow is the shape of every key row the queries above return; sqlc
// generates one type of it per query.
type apiKeyRow interface {
	~struct {
		ID              uuid.UUID
		MerchantName    string
		KeyPrefix       string
		Kind            string
		DevelopmentOnly bool
		CreatedAt       time.Time
		RevokedAt       *time.Time
	}
}

func apiKeyFromRow[R apiKeyRow](row R) APIKey {
	r := sqlc.ListAPIKeysRow(row)
	return APIKey{
		ID: r.ID, Merchant: r.MerchantName, Prefix: r.KeyPrefix, Kind: KeyKind(r.Kind),
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

func (s *store) addOrigin(ctx context.Context, merchantID uuid.UUID, origin string) (bool, error) {
	n, err := s.q.AddMerchantOrigin(ctx, sqlc.AddMerchantOriginParams{MerchantID: merchantID, Origin: origin})
	return n > 0, payment.DBError(err)
}

func (s *store) removeOrigin(ctx context.Context, merchantID uuid.UUID, origin string) (bool, error) {
	n, err := s.q.RemoveMerchantOrigin(ctx, sqlc.RemoveMerchantOriginParams{MerchantID: merchantID, Origin: origin})
	return n > 0, payment.DBError(err)
}

func (s *store) origins(ctx context.Context, merchantName *string) ([]Origin, error) {
	rows, err := s.q.ListMerchantOrigins(ctx, merchantName)
	out := make([]Origin, len(rows))
	for i, r := range rows {
		out[i] = Origin{Merchant: r.MerchantName, Origin: r.Origin, CreatedAt: r.CreatedAt}
	}
	return out, payment.DBError(err)
}

func (s *store) originAllowed(ctx context.Context, merchantID uuid.UUID, origin string) (bool, error) {
	ok, err := s.q.MerchantOriginExists(ctx, sqlc.MerchantOriginExistsParams{MerchantID: merchantID, Origin: origin})
	return ok, payment.DBError(err)
}

func (s *store) anyOriginAllowed(ctx context.Context, origin string) (bool, error) {
	ok, err := s.q.AnyMerchantOriginExists(ctx, origin)
	return ok, payment.DBError(err)
}

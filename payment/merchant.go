package payment

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/sqlc"
)

// apiKeyPrefix marks chargeonce secret keys, so a leaked one is recognizable.
const apiKeyPrefix = "co_sk_"

var merchantNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Merchants authenticates API keys and manages merchants.
type Merchants struct {
	store *store
	// allowDevelopmentKeys lets development-only keys (the seeded demo key)
	// authenticate; production refuses them even if they are in the database.
	allowDevelopmentKeys bool
}

// NewMerchants returns a Merchants on pool.
func NewMerchants(pool *pgxpool.Pool, allowDevelopmentKeys bool) *Merchants {
	return &Merchants{store: newStore(pool), allowDevelopmentKeys: allowDevelopmentKeys}
}

// Authenticate returns the merchant that owns apiKey.
func (ms *Merchants) Authenticate(ctx context.Context, apiKey string) (Merchant, error) {
	if apiKey == "" {
		return Merchant{}, Errorf(EUNAUTHENTICATED, "missing API key: send the header Authorization: Bearer <api key>")
	}
	m, err := ms.store.q.GetMerchantByAPIKey(ctx, sqlc.GetMerchantByAPIKeyParams{
		KeyHash: hashAPIKey(apiKey), AllowDevelopmentOnly: ms.allowDevelopmentKeys,
	})
	if err = interpretError(err); errors.Is(err, errNotFound) {
		return Merchant{}, Errorf(EUNAUTHENTICATED, "unknown or revoked API key")
	}
	if err != nil {
		return Merchant{}, err
	}
	return Merchant{ID: m.ID, Name: m.Name}, nil
}

// CreateAPIKey creates the merchant name if needed and a new API key for it.
// The key is returned once; only its hash is stored.
func (ms *Merchants) CreateAPIKey(ctx context.Context, name string) (Merchant, string, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return Merchant{}, "", err
	}
	key := apiKeyPrefix + base64.RawURLEncoding.EncodeToString(secret)
	m, err := ms.addKey(ctx, name, key, false)
	return m, key, err
}

// EnsureDevelopmentKey makes sure the merchant name exists and key
// authenticates it while development keys are allowed. Safe to repeat.
func (ms *Merchants) EnsureDevelopmentKey(ctx context.Context, name, key string) (Merchant, error) {
	return ms.addKey(ctx, name, key, true)
}

func (ms *Merchants) addKey(ctx context.Context, name, key string, developmentOnly bool) (Merchant, error) {
	if !merchantNamePattern.MatchString(name) {
		return Merchant{}, invalid("name", "merchant name must be 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit; got %q", name)
	}
	if key == "" {
		return Merchant{}, invalid("key", "API key is empty")
	}
	m, err := ms.store.q.UpsertMerchant(ctx, sqlc.UpsertMerchantParams{ID: uuid.New(), Name: name})
	if err != nil {
		return Merchant{}, fmt.Errorf("store merchant: %w", interpretError(err))
	}
	err = ms.store.q.InsertAPIKey(ctx, sqlc.InsertAPIKeyParams{
		ID: uuid.New(), MerchantID: m.ID, KeyHash: hashAPIKey(key),
		KeyPrefix: key[:min(len(key), len(apiKeyPrefix)+4)], DevelopmentOnly: developmentOnly,
	})
	if err != nil {
		return Merchant{}, fmt.Errorf("store API key: %w", interpretError(err))
	}
	return Merchant{ID: m.ID, Name: m.Name}, nil
}

// hashAPIKey hashes a key for storage and lookup. Keys are 256-bit random
// strings, so a fast unsalted hash is enough (a slow one would only slow down
// every request).
func hashAPIKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

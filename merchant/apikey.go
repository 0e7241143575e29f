package merchant

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"chargeonce/payment"
)

// APIKey is what operators see of a stored API key: never the key, never
// its hash.
type APIKey struct {
	ID              uuid.UUID
	Merchant        string // the merchant's name
	Prefix          string // the key's first characters (keyPrefix)
	Kind            KeyKind
	DevelopmentOnly bool
	CreatedAt       time.Time
	RevokedAt       *time.Time // nil while the key is live
}

// RotateAPIKey makes a new API key of kind for the existing merchant name.
// The merchant's other live keys of that kind are returned and stay valid
// until they are revoked, so clients can move to the new key before the old
// one stops working. The key is returned once; only its hash and prefix are
// stored.
func (ms *Service) RotateAPIKey(ctx context.Context, name string, kind KeyKind) (m payment.Merchant, key string, stillValid []APIKey, err error) {
	if !kind.valid() {
		return payment.Merchant{}, "", nil, payment.Invalid("kind", "an API key is secret or publishable, not %q", kind)
	}
	if m, err = ms.existingMerchant(ctx, name); err != nil {
		return payment.Merchant{}, "", nil, err
	}
	// Listed before the new key exists, so a failure here loses no key.
	live, err := ms.store.liveAPIKeysOfMerchant(ctx, m.ID)
	if err != nil {
		return payment.Merchant{}, "", nil, err
	}
	for _, k := range live {
		if k.Kind == kind {
			stillValid = append(stillValid, k)
		}
	}
	if key, err = newAPIKey(kind); err != nil {
		return payment.Merchant{}, "", nil, err
	}
	if err := ms.store.insertAPIKey(ctx, uuid.New(), m.ID, hashAPIKey(key), keyPrefix(key), kind, false); err != nil {
		return payment.Merchant{}, "", nil, fmt.Errorf("store API key: %w", err)
	}
	return m, key, stillValid, nil
}

// ListAPIKeys returns every API key of every merchant, revoked ones included,
// by merchant name and then age.
func (ms *Service) ListAPIKeys(ctx context.Context) ([]APIKey, error) {
	return ms.store.apiKeys(ctx)
}

// RevokeAPIKey revokes an API key at once: the next request with it is
// refused, on every server, whose caches hear it by NOTIFY at commit. prefixOrID is a key's id, or the prefix of exactly one live key
// (if several share it, it is ambiguous and the key must be named by id).
// Revoking a key that is already revoked is an error that says when it was.
func (ms *Service) RevokeAPIKey(ctx context.Context, prefixOrID string) (APIKey, error) {
	if id, err := uuid.Parse(prefixOrID); err == nil {
		return ms.revokeAPIKey(ctx, id)
	}
	prefix := prefixOrID
	if prefix == "" || len(prefix) > 10 {
		// Not echoed: a long argument may well be a whole key.
		return APIKey{}, payment.Invalid("key", "name the API key to revoke by its id or its prefix (at most 10 characters); `chargeonce apikey list` shows them")
	}
	keys, err := ms.store.liveAPIKeysByPrefix(ctx, prefix)
	if err != nil {
		return APIKey{}, err
	}
	switch len(keys) {
	case 0:
		return APIKey{}, payment.Errorf(payment.ENOTFOUND, "no live API key has the prefix %q; `chargeonce apikey list` shows the keys", prefix)
	case 1:
		return ms.revokeAPIKey(ctx, keys[0].ID)
	default:
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = fmt.Sprintf("%s (merchant %s, created %s)", k.ID, k.Merchant, k.CreatedAt.UTC().Format(time.RFC3339))
		}
		return APIKey{}, payment.Invalid("key", "the prefix %q is ambiguous: %d live API keys have it; revoke one by its id: %s",
			prefix, len(keys), strings.Join(ids, ", "))
	}
}

func (ms *Service) revokeAPIKey(ctx context.Context, id uuid.UUID) (APIKey, error) {
	k, err := ms.store.revokeAPIKey(ctx, id)
	if payment.ErrorCode(err) != payment.ENOTFOUND {
		return k, err
	}
	// Unknown, or revoked already: say which.
	k, err = ms.store.apiKey(ctx, id)
	if payment.ErrorCode(err) == payment.ENOTFOUND {
		return APIKey{}, payment.Errorf(payment.ENOTFOUND, "no API key has the id %s; `chargeonce apikey list` shows the keys", id)
	}
	if err != nil {
		return APIKey{}, err
	}
	return APIKey{}, payment.Invalid("key", "API key %s (%s, merchant %s) was already revoked at %s",
		k.Prefix, k.ID, k.Merchant, k.RevokedAt.UTC().Format(time.RFC3339))
}

// Package merchant holds chargeonce's merchants and their API keys: it
// authenticates the key a request presents (Authenticate, in constant
// time, by the key's hash: no key is stored), creates, rotates, lists and
// revokes keys for the operator commands, seeds the development key, and
// caches successful authentications on each server while it hears every
// change of a key by PostgreSQL's NOTIFY (cache.go). Its store (store.go)
// is the package's only code that runs sqlc.
package merchant

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/metrics"
	"chargeonce/payment"
)

// KeyKind is what an API key may do.
type KeyKind string

const (
	// KeySecret (co_sk_…) belongs on the merchant's server and may run
	// every operation.
	KeySecret KeyKind = "secret"
	// KeyPublishable (co_pk_…) may appear in a checkout page's source: alone
	// it grants nothing, and with a checkout session's client secret it may
	// pay that session and read its attempts.
	KeyPublishable KeyKind = "publishable"
)

// keyMark starts every generated key of a kind, so that a leaked one is
// recognizable, and its kind with it.
func (k KeyKind) keyMark() string {
	if k == KeyPublishable {
		return "co_pk_"
	}
	return "co_sk_"
}

func (k KeyKind) valid() bool { return k == KeySecret || k == KeyPublishable }

// Caller is who presented an API key: the merchant, and which key of which
// kind.
type Caller struct {
	Merchant payment.Merchant
	KeyID    uuid.UUID
	Kind     KeyKind
}

var merchantNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Service authenticates API keys and manages merchants.
type Service struct {
	store *store
	cfg   Config
	log   *slog.Logger
	// allowDevelopmentKeys lets development-only keys (the seeded demo key)
	// authenticate; production refuses them even if they are in the database.
	// It never changes, so what the cache holds was looked up under it.
	allowDevelopmentKeys bool
	cache                *keyCache

	listenersMu sync.Mutex
	listeners   []func() // OnChange's
}

// Config tunes a Service. Zero values take the defaults.
type Config struct {
	// CacheTTL bounds how long a successful authentication is served from
	// the cache (which only Run turns on); CacheSize how many are kept.
	CacheTTL  time.Duration // default APIKeyCacheTTLDefault
	CacheSize int           // default APIKeyCacheSizeDefault
	// ReconnectMin and ReconnectMax bound the wait before Run opens its
	// LISTEN connection again; the wait doubles after each failure.
	ReconnectMin, ReconnectMax time.Duration // defaults db.ReconnectMinDefault, db.ReconnectMaxDefault

	// Production refuses plain-http origins: none is registered
	// (AddOrigin), and one registered before is not honoured
	// (OriginAllowed, AnyOriginAllowed). A page served over http can be
	// changed by anyone on its path, and production's are https.
	Production bool

	Logger  *slog.Logger     // default: discard
	Metrics *metrics.Metrics // default: instruments nobody scrapes
}

// New returns a Service on pool with the default configuration;
// allowDevelopmentKeys lets the development-only keys (the seeded demo key)
// authenticate, as development does and production must not.
func New(pool *pgxpool.Pool, allowDevelopmentKeys bool) *Service {
	return NewWithConfig(pool, allowDevelopmentKeys, Config{})
}

// NewWithConfig returns a Service on pool configured by cfg.
func NewWithConfig(pool *pgxpool.Pool, allowDevelopmentKeys bool, cfg Config) *Service {
	cfg.CacheTTL = cmp.Or(cfg.CacheTTL, APIKeyCacheTTLDefault)
	cfg.CacheSize = cmp.Or(cfg.CacheSize, APIKeyCacheSizeDefault)
	cfg.ReconnectMin = cmp.Or(cfg.ReconnectMin, db.ReconnectMinDefault)
	cfg.ReconnectMax = cmp.Or(cfg.ReconnectMax, db.ReconnectMaxDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Discard()
	}
	return &Service{store: newStore(pool), cfg: cfg, log: cfg.Logger.With("component", "api-keys"),
		allowDevelopmentKeys: allowDevelopmentKeys, cache: newKeyCache(cfg.CacheTTL, cfg.CacheSize, cfg.Metrics)}
}

// Authenticate returns the merchant that owns apiKey. It looks up the live
// keys under apiKey's prefix and compares hashes in constant time, every
// candidate to the end, so that neither the comparison nor which candidate
// matched shows in the response time. While Run listens, a key that
// authenticated recently is answered from the cache, by its hash; failures
// are never cached.
func (ms *Service) Authenticate(ctx context.Context, apiKey string) (Caller, error) {
	return ms.authenticate(ctx, apiKey, ms.cfg.CacheTTL)
}

// Reauthenticate is Authenticate for a caller that holds an authentication
// open (a websocket, an event stream) and checks it again every nextCheck:
// it takes from the cache only an entry that will still be younger than the
// cache's TTL at the next check. So a key revoked while no notification
// reaches this server (a LISTEN connection cut without a word) is found
// within the TTL, as a request's is, and not a check later.
func (ms *Service) Reauthenticate(ctx context.Context, apiKey string, nextCheck time.Duration) (Caller, error) {
	return ms.authenticate(ctx, apiKey, ms.cfg.CacheTTL-nextCheck)
}

// authenticate is Authenticate, taking from the cache only entries younger
// than maxAge.
func (ms *Service) authenticate(ctx context.Context, apiKey string, maxAge time.Duration) (Caller, error) {
	if apiKey == "" {
		return Caller{}, payment.Errorf(payment.EUNAUTHENTICATED, "missing API key: send the header Authorization: Bearer <api key>")
	}
	unknown := payment.Errorf(payment.EUNAUTHENTICATED, "unknown or revoked API key")
	if !isKeyText(apiKey) {
		// No stored key looks like this, and PostgreSQL would refuse a
		// prefix that is not valid text.
		return Caller{}, unknown
	}
	hash := hashAPIKey(apiKey)
	cached, ok, gen := ms.cache.get([sha256.Size]byte(hash), maxAge)
	if ok {
		return cached, nil
	}
	candidates, err := ms.store.apiKeyCandidates(ctx, keyPrefix(apiKey), ms.allowDevelopmentKeys)
	if err != nil {
		return Caller{}, err
	}
	var found Caller
	matched := false
	for _, c := range candidates {
		if subtle.ConstantTimeCompare(c.hash, hash) == 1 {
			found, matched = c.caller, true
		}
	}
	if !matched {
		// A key a re-check found revoked is not served from the cache to
		// anyone any more.
		ms.cache.forget([sha256.Size]byte(hash))
		return Caller{}, unknown
	}
	ms.cache.put([sha256.Size]byte(hash), found, gen)
	return found, nil
}

// CreateAPIKey creates the merchant name if needed and a new API key of kind
// for it. The key is returned once; only its hash and prefix are stored.
func (ms *Service) CreateAPIKey(ctx context.Context, name string, kind KeyKind) (payment.Merchant, string, error) {
	key, err := newAPIKey(kind)
	if err != nil {
		return payment.Merchant{}, "", err
	}
	m, err := ms.addKey(ctx, name, key, kind, false)
	return m, key, err
}

// minDevelopmentKeyLength is the shortest development key accepted. A key's
// prefix is at most half of it, so even the shortest keeps most of it secret.
const minDevelopmentKeyLength = 8

// EnsureDevelopmentKey makes sure the merchant name exists and key
// authenticates it while development keys are allowed. Safe to repeat: a key
// that is stored already only gets its prefix corrected (older versions
// stored short keys whole), and stays revoked if an operator revoked it.
// key must be at least 8 printable ASCII characters without spaces. A key
// stored already keeps the kind it was stored with.
func (ms *Service) EnsureDevelopmentKey(ctx context.Context, name, key string, kind KeyKind) (payment.Merchant, error) {
	if len(key) < minDevelopmentKeyLength || !isKeyText(key) {
		return payment.Merchant{}, payment.Invalid("key", "a development API key must be at least %d printable ASCII characters without spaces", minDevelopmentKeyLength)
	}
	return ms.addKey(ctx, name, key, kind, true)
}

func (ms *Service) addKey(ctx context.Context, name, key string, kind KeyKind, developmentOnly bool) (payment.Merchant, error) {
	if err := checkMerchantName(name); err != nil {
		return payment.Merchant{}, err
	}
	if key == "" {
		return payment.Merchant{}, payment.Invalid("key", "API key is empty")
	}
	if !kind.valid() {
		return payment.Merchant{}, payment.Invalid("kind", "an API key is secret or publishable, not %q", kind)
	}
	m, err := ms.store.upsertMerchant(ctx, name)
	if err != nil {
		return payment.Merchant{}, fmt.Errorf("store merchant: %w", err)
	}
	if err := ms.store.insertAPIKey(ctx, uuid.New(), m.ID, hashAPIKey(key), keyPrefix(key), kind, developmentOnly); err != nil {
		return payment.Merchant{}, fmt.Errorf("store API key: %w", err)
	}
	return m, nil
}

func checkMerchantName(name string) error {
	if !merchantNamePattern.MatchString(name) {
		return payment.Invalid("name", "merchant name must be 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit; got %q", name)
	}
	return nil
}

// newAPIKey returns a new key of kind: its mark (co_sk_ or co_pk_) and 256
// random bits.
func newAPIKey(kind KeyKind) (string, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	return kind.keyMark() + base64.RawURLEncoding.EncodeToString(secret), nil
}

// keyPrefix returns a key's public identifier, stored beside its hash: the
// first min(10, len(key)/2) bytes. For a generated key that is "co_sk_" (or "co_pk_") and 4
// more characters; for the demo key "demo-key", "demo". It is never the whole
// key, and for the keys we accept (generated ones, development ones of at
// least 8 characters) it leaves at least half of the key secret.
// Authentication looks keys up by it, and operators name keys by it.
func keyPrefix(key string) string {
	return key[:min(10, len(key)/2)]
}

// isKeyText reports whether key consists of printable ASCII characters
// without spaces, as every key we store does.
func isKeyText(key string) bool {
	for i := range len(key) {
		if key[i] <= ' ' || key[i] > '~' {
			return false
		}
	}
	return true
}

// hashAPIKey hashes a key for storage and lookup. Keys are 256-bit random
// strings, so a fast unsalted hash is enough (a slow one would only slow down
// every request).
func hashAPIKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// SessionSeed is the secret material of apiKey that checkout sessions'
// client secrets are derived from (payment.CreateCheckoutSession): only who
// holds the key can compute them, and it is neither the key nor its stored
// hash.
func SessionSeed(apiKey string) []byte {
	sum := sha256.Sum256([]byte("chargeonce checkout session seed\x00" + apiKey))
	return sum[:]
}

package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Endpoint is a merchant's webhook endpoint, as operators see it: never its
// secret.
type Endpoint struct {
	ID         uuid.UUID
	MerchantID uuid.UUID
	Merchant   string // the merchant's name
	URL        string
	CreatedAt  time.Time // when the merchant's endpoint was first set
	UpdatedAt  time.Time // when its URL and secret were last set
}

// LogEntry is one row of an endpoint's delivery log: an attempt, with the
// state of its delivery, or a delivery not attempted yet (Attempt 0).
type LogEntry struct {
	EventID   uuid.UUID
	EventType string
	State     string // pending, delivered or failed (given up)
	QueuedAt  time.Time
	// NextAttemptAt is when a pending delivery is due (zero otherwise).
	NextAttemptAt time.Time
	Attempt       int // 1 for the first attempt; 0: none yet
	StartedAt     time.Time
	Duration      time.Duration
	HTTPStatus    int    // 0: no answer came
	Error         string // why the attempt failed without an answer, or was refused
}

// Endpoints registers, lists and removes merchants' endpoints, and reads
// their delivery logs: the operator commands' side of the package.
type Endpoints struct {
	store      *store
	production bool
	reach      reach
	now        func() time.Time
}

// NewEndpoints returns Endpoints on pool, under cfg's rules of what an
// endpoint may be (Production, AllowPrivateNetworks, LookupHost): in
// production, only https:// URLs on public addresses.
func NewEndpoints(pool *pgxpool.Pool, cfg Config) *Endpoints {
	return &Endpoints{store: newStore(pool, ""), production: cfg.Production, reach: newReach(cfg), now: time.Now}
}

// Errors of Endpoints, for errors.Is.
var (
	ErrNoMerchant = errors.New("no such merchant")
	ErrNoEndpoint = errors.New("no webhook endpoint")
	ErrInvalidURL = errors.New("invalid webhook URL")
)

// Set registers rawURL as the endpoint of merchant, replacing the URL and the
// secret of the endpoint it has, and returns the new signing secret. In
// production its host must be a public address, or a name whose every
// address is (address.go). The
// secret is returned once: it is stored for signing, and never listed or
// logged. Deliveries still pending go to the new URL with the new secret.
func (es *Endpoints) Set(ctx context.Context, merchant, rawURL string) (Endpoint, string, error) {
	u, err := CheckURL(rawURL, es.production)
	if err != nil {
		return Endpoint{}, "", err
	}
	if err := es.reach.checkHost(ctx, u.Hostname()); err != nil {
		return Endpoint{}, "", err
	}
	id, err := es.merchantID(ctx, merchant)
	if err != nil {
		return Endpoint{}, "", err
	}
	sec, err := newSecret()
	if err != nil {
		return Endpoint{}, "", err
	}
	e, err := es.store.upsertEndpoint(ctx, id, u.String(), sec, es.now())
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("store webhook endpoint: %w", err)
	}
	e.Merchant = merchant
	return e, string(sec), nil
}

// List returns every merchant's endpoint, by merchant name.
func (es *Endpoints) List(ctx context.Context) ([]Endpoint, error) {
	return es.store.endpoints(ctx)
}

// Remove forgets the endpoint of merchant, its deliveries (pending ones are
// never sent) and their log, and says how many deliveries were pending.
func (es *Endpoints) Remove(ctx context.Context, merchant string) (Endpoint, int, error) {
	id, err := es.merchantID(ctx, merchant)
	if err != nil {
		return Endpoint{}, 0, err
	}
	u, pending, err := es.store.deleteEndpoint(ctx, id)
	if errors.Is(err, errNotFound) {
		return Endpoint{}, 0, noEndpoint(merchant)
	}
	return Endpoint{MerchantID: id, Merchant: merchant, URL: u}, pending, err
}

// Deliveries returns the newest limit rows of the delivery log of merchant's
// endpoint, newest first.
func (es *Endpoints) Deliveries(ctx context.Context, merchant string, limit int) (Endpoint, []LogEntry, error) {
	id, err := es.merchantID(ctx, merchant)
	if err != nil {
		return Endpoint{}, nil, err
	}
	e, err := es.store.endpointOfMerchant(ctx, id)
	if errors.Is(err, errNotFound) {
		return Endpoint{}, nil, noEndpoint(merchant)
	}
	if err != nil {
		return Endpoint{}, nil, err
	}
	log, err := es.store.deliveryLog(ctx, e.ID, limit)
	return e, log, err
}

func (es *Endpoints) merchantID(ctx context.Context, name string) (uuid.UUID, error) {
	id, err := es.store.merchantID(ctx, name)
	if errors.Is(err, errNotFound) {
		return uuid.Nil, fmt.Errorf("%w named %s; create one with `chargeonce apikey create %s`", ErrNoMerchant, name, name)
	}
	return id, err
}

func noEndpoint(merchant string) error {
	return fmt.Errorf("merchant %s has %w; register one with `chargeonce webhook set %s URL`", merchant, ErrNoEndpoint, merchant)
}

// maxURLLength bounds an endpoint URL; a real one is far shorter.
const maxURLLength = 2048

// CheckURL parses an endpoint URL and says why it is refused: it must be
// absolute, http or https, with a host, and without credentials (they would
// be stored and sent in the clear) or a fragment (never sent). In production
// only https is accepted. Its errors never quote the URL, which may hold
// credentials.
func CheckURL(raw string, production bool) (*url.URL, error) {
	refuse := func(why string) (*url.URL, error) { return nil, fmt.Errorf("%w: %s", ErrInvalidURL, why) }
	if len(raw) > maxURLLength {
		return refuse(fmt.Sprintf("longer than %d characters", maxURLLength))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return refuse("it does not parse as a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return refuse("it must be an absolute http:// or https:// URL")
	case u.Opaque != "" || u.Hostname() == "":
		return refuse("it has no host")
	case u.User != nil:
		return refuse("it must not carry credentials (user:password@); authenticate the webhook by its signature")
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		return refuse("it must not have a fragment (#…), which is never sent")
	case production && u.Scheme != "https":
		return refuse("it must be https:// when APP_ENV=production")
	}
	return u, nil
}

// secretPrefix marks chargeonce webhook signing secrets, so a leaked one is
// recognizable.
const secretPrefix = "whsec_"

// secret is an endpoint's signing secret. It prints and logs redacted, so
// that it cannot leak through a log line or an error by accident.
type secret string

func (secret) String() string               { return secretPrefix + "…" }
func (secret) LogValue() slog.Value         { return slog.StringValue(secretPrefix + "…") }
func (s secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.String()) }

// newSecret returns a new signing secret: secretPrefix and 256 random bits.
func newSecret() (secret, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return secret(secretPrefix + base64.RawURLEncoding.EncodeToString(b)), nil
}

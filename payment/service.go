package payment

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/metrics"
)

// Service charges cards at most once per (merchant, idempotency key). Its
// jobs live in a file each: the claim (claim.go), the provider call and the
// finalizing write (charge.go), the settling of an attempt a new holder
// took over (settle.go), the lease and its holders (lease.go), and the
// answers (result.go); doc.go draws the attempt's states.
type Service struct {
	store    *store
	provider Provider
	cfg      Config
	log      *slog.Logger
	metrics  *metrics.Metrics
	// finished answers replays of finished attempts from memory.
	finished *finishedCache
}

// NewService returns a Service on pool that charges through provider.
func NewService(pool *pgxpool.Pool, provider Provider, cfg Config) *Service {
	cfg = cfg.withDefaults()
	st := newStore(pool)
	st.committed = cfg.EventsCommitted
	return &Service{store: st, provider: instrument(provider, cfg.Metrics), cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics,
		finished: newFinishedCache(cfg.ResultCacheSize, cfg.Metrics)}
}

// attemptLog is the logger for work on a: an idempotency key means something
// only within its merchant's scope, so the two go together.
func (s *Service) attemptLog(m Merchant, a Attempt) *slog.Logger {
	return s.log.With("merchant", m.Name, "idempotency_key", a.IdempotencyKey, "attempt_id", a.ID, "attempt", a.Number)
}

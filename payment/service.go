package payment

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/metrics"
)

// Service runs every attempt (a charge, a refund…) at most once per
// (merchant, idempotency key). The engine's jobs live in a file each: the
// kinds and their operations (operation.go), the claim (claim.go), the
// provider call and the finalizing write (perform.go), the settling of an
// attempt a new holder took over (settle.go), the lease and its holders
// (lease.go), and the answers (result.go); doc.go draws the attempt's
// states. Each kind has its own file (charge.go, refund.go, …).
type Service struct {
	store    *store
	provider Provider
	cfg      Config
	log      *slog.Logger
	metrics  *metrics.Metrics
	// finished answers replays of finished attempts from memory.
	finished *finishedCache
	// ops are the registered kinds' operations.
	ops map[Kind]operation
	// answers writes the replays' answers that KeepAnswer is given.
	answers *answerWriter
}

// NewService returns a Service on pool that charges through provider.
func NewService(pool *pgxpool.Pool, provider Provider, cfg Config) *Service {
	cfg = cfg.withDefaults()
	st := newStore(pool)
	st.committed = cfg.EventsCommitted
	st.hist = cfg.History
	s := &Service{store: st, provider: instrument(provider, cfg.Metrics), cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics,
		ops: make(map[Kind]operation, len(operations))}
	for kind, op := range operations {
		s.ops[kind] = op(s)
	}
	s.finished = newFinishedCache(cfg.ResultCacheSize, cfg.Metrics, func(a Attempt) bool { return s.op(a).settled(a) })
	s.answers = &answerWriter{write: st.storeAnswers, warn: func(err error, n int) {
		s.log.Warn("replays' answers not kept", "answers", n, "err", err)
	}}
	return s
}

// attemptLog is the logger for work on a, the one set of keys every log
// line about an attempt carries: an idempotency key means something only
// within its merchant's scope, so the two go together. m may be the zero
// Merchant while it is not loaded yet.
func (s *Service) attemptLog(m Merchant, a Attempt) *slog.Logger {
	return attemptLogger(s.log, m, a)
}

// attemptLogger is attemptLog on log, a component's logger.
func attemptLogger(log *slog.Logger, m Merchant, a Attempt) *slog.Logger {
	return log.With("merchant_id", a.MerchantID, "merchant", m.Name, "idempotency_key", a.IdempotencyKey,
		"kind", a.Kind, "attempt_id", a.ID, "fence", a.Fence)
}

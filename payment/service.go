package payment

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	goretry "github.com/sethvargo/go-retry"

	"chargeonce/db"
	"chargeonce/metrics"
)

// Config tunes a Service. Zero values take the defaults.
type Config struct {
	// Retention is how long the stored result of a key is kept (expiresAt).
	Retention time.Duration // default 24h
	// Lease is how long the holder of an attempt may work on it before the
	// reconciler, or a retry, may take it over. The request's own provider
	// phase ends at half of it.
	Lease time.Duration // default 30s
	// ReconcileInterval is how often the reconciler looks for abandoned
	// attempts; a PROCESSING answer whose lease has ended says to come back then.
	ReconcileInterval time.Duration // default 5s
	// RedriveWindow is how long after its claim an attempt the provider has
	// never seen is sent again (by the reconciler or a retry that took it
	// over); after it, the attempt fails with provider_unavailable.
	RedriveWindow time.Duration // default 10m
	// PollInterval is the longest retryAfter given while a holder is working.
	PollInterval time.Duration // default 1s
	// ProviderRetries is how many times an unknown provider outcome is retried
	// inline, with the same provider key, before the request answers PROCESSING.
	ProviderRetries uint64 // default 2
	// ProviderRetryBudget bounds the time spent on those inline retries.
	ProviderRetryBudget time.Duration // default 3s
	// ResultCacheSize bounds how many finished results an instance keeps in
	// memory for replays and status queries; negative keeps none.
	ResultCacheSize int // default 20,000
	// StoreTimeout bounds how long a request waits for the database before
	// its claim (a connection from the pool included); past it the request
	// answers EUNAVAILABLE instead of piling up behind a saturated pool.
	StoreTimeout time.Duration // default 5s
	// Now is the clock; tests move it.
	Now func() time.Time
	// Fault, when set, is called at each dangerous point of a charge. Only
	// crash tests set it, to kill the process there.
	Fault   func(FaultPoint)
	Logger  *slog.Logger
	Metrics *metrics.Metrics // default: instruments nobody scrapes
}

// Defaults of Config, the one place they are written.
const (
	RetentionDefault           = 24 * time.Hour
	LeaseDefault               = 30 * time.Second
	ReconcileIntervalDefault   = 5 * time.Second
	RedriveWindowDefault       = 10 * time.Minute
	StoreTimeoutDefault        = 5 * time.Second
	PollIntervalDefault        = time.Second
	ProviderRetriesDefault     = 2
	ProviderRetryBudgetDefault = 3 * time.Second
	ResultCacheSizeDefault     = 20_000
)

// FaultPoint names a point of a charge where a crash is most dangerous.
type FaultPoint string

const (
	FaultAfterClaim    FaultPoint = "after-claim"    // claimed, provider not called yet
	FaultAfterProvider FaultPoint = "after-provider" // provider charged, result not recorded
	FaultAfterFinalize FaultPoint = "after-finalize" // result recorded, response not written
)

func (c Config) withDefaults() Config {
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, ReconcileIntervalDefault)
	c.RedriveWindow = cmp.Or(c.RedriveWindow, RedriveWindowDefault)
	c.StoreTimeout = cmp.Or(c.StoreTimeout, StoreTimeoutDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.ProviderRetries = cmp.Or(c.ProviderRetries, ProviderRetriesDefault)
	c.ProviderRetryBudget = cmp.Or(c.ProviderRetryBudget, ProviderRetryBudgetDefault)
	c.ResultCacheSize = cmp.Or(c.ResultCacheSize, ResultCacheSizeDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Fault == nil {
		c.Fault = func(FaultPoint) {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.Discard()
	}
	return c
}

// Service charges cards at most once per (merchant, idempotency key).
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
	return &Service{store: newStore(pool), provider: instrument(provider, cfg.Metrics), cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics,
		finished: newFinishedCache(cfg.ResultCacheSize, cfg.Metrics)}
}

// ChargeCard charges the card described by in, once per key: the first
// request with a key claims it and calls the provider; every later one gets
// the stored result (replayed), PROCESSING while the attempt is open, or
// EKEYREUSED when its input differs from the first's. A second payment of an
// order under another key is EORDERPAID. A retry that finds the attempt held
// by nobody (its holder died, gave up, or never learned that its claim
// committed) takes it over and settles it at once. While the database cannot
// be reached the answer is EUNAVAILABLE, and nothing is charged.
func (s *Service) ChargeCard(ctx context.Context, m Merchant, key string, in ChargeInput) (_ Result, err error) {
	// Every error is answered before the provider is called: say so.
	defer func() {
		var e *Error
		if errors.As(err, &e) && e.Code == EUNAVAILABLE {
			unavailable := *e
			unavailable.Message = "the payment database is unavailable; nothing was charged. Retry the same request with the same idempotency key after retryAfterMs"
			err = &unavailable
		}
	}()
	if err := ValidateKey(key); err != nil {
		return Result{}, err
	}
	if err := in.Validate(); err != nil {
		return Result{}, err
	}
	if a, ok := s.finished.get(m.ID, key, s.cfg.Now()); ok {
		// A replay of a finished attempt: nothing to ask the database.
		return s.answerRetry(ctx, ctx, m, a, Fingerprint(in))
	}
	dbCtx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	// Twice at most: a key whose expired result is deleted between our claim
	// and our read is free again, and the second claim takes it.
	for range 2 {
		a := newAttempt(m, key, in, s.cfg.Now(), s.cfg.Lease, s.cfg.Retention)
		got, claimed, err := s.store.claim(dbCtx, a)
		if err != nil {
			switch code := ErrorCode(err); {
			case code == EUNAVAILABLE && db.MayHaveRun(err):
				s.releaseLostClaim(ctx, m, a)
			case code == EORDERPAID:
				// Another key holds a live attempt for this order (the unique
				// index refused ours); counted like an order already paid.
				s.metrics.OrderPaid.Inc()
			}
			return Result{}, err
		}
		if claimed {
			s.cfg.Fault(FaultAfterClaim)
			// From here on the attempt is ours and must reach the provider and
			// the database whatever the client does: a client that hangs up
			// must not leave a charge unrecorded.
			return s.charge(context.WithoutCancel(ctx), m, got), nil
		}
		// The common retry: the claim's statement read the stored attempt.
		// Nothing read: the key was claimed by a transaction the statement's
		// snapshot did not see; read it again.
		if got.ID == uuid.Nil {
			got, err = s.store.get(dbCtx, m.ID, key)
		}
		if err == nil {
			return s.answerRetry(ctx, dbCtx, m, got, a.Fingerprint)
		}
		if !errors.Is(err, errNotFound) {
			return Result{}, err
		}
		// Not claimed and not stored: the order is paid, or the key was just freed.
		if in.OrderID != "" {
			paid, err := s.store.orderIsPaid(dbCtx, m.ID, in.OrderID)
			if err != nil {
				return Result{}, err
			}
			if paid {
				s.metrics.OrderPaid.Inc()
				return Result{}, errOrderPaid
			}
		}
	}
	return Result{}, fmt.Errorf("claim of key %q neither succeeded nor found a stored attempt", key)
}

// answerRetry answers a request whose key is already claimed by a.
func (s *Service) answerRetry(ctx, dbCtx context.Context, m Merchant, a Attempt, fingerprint []byte) (Result, error) {
	s.finished.put(a)
	if !bytes.Equal(a.Fingerprint, fingerprint) {
		s.metrics.KeyReused.Inc()
		return Result{}, &Error{Code: EKEYREUSED, Field: "idempotencyKey",
			Message: "this idempotency key was already used with a different request; nothing was charged. Use a new key for a new checkout attempt"}
	}
	if now := s.cfg.Now(); a.abandoned(now) {
		// Nobody holds the attempt. Take it over rather than make the client
		// wait for the reconciler; of several retries, one wins the takeover.
		taken, ok, err := s.store.takeOver(dbCtx, a, now, now.Add(s.cfg.Lease))
		if err != nil {
			return Result{}, err
		}
		if ok {
			s.metrics.RetryTakeovers.Inc()
			log := s.attemptLog(m, taken)
			log.InfoContext(ctx, "retry took over an attempt nobody held")
			return s.resume(context.WithoutCancel(ctx), log, m, taken), nil
		}
		// Another retry or the reconciler took it a moment ago: report theirs.
		if a, err = s.store.get(dbCtx, m.ID, a.IdempotencyKey); err != nil {
			return Result{}, err
		}
	}
	return s.stored(a), nil
}

// stored answers a retry with the stored attempt a: a replay of its result,
// or PROCESSING while another holder works on it.
func (s *Service) stored(a Attempt) Result {
	if a.Status == StatusProcessing {
		s.metrics.InFlight.Inc()
	} else {
		s.metrics.Replays.Inc()
	}
	return s.result(a, true)
}

// releaseLostClaim handles a claim whose outcome is unknown: the database
// may have committed it and lost only the reply. If it did, the attempt's
// lease belongs to this request, which is about to answer an error; giving
// the lease back lets the client's retry take the attempt over instead of
// waiting for the lease to run out. The release is fenced on the claim's own
// id and first attempt number, so it changes nothing if the claim never
// happened or someone has taken the attempt since.
func (s *Service) releaseLostClaim(ctx context.Context, m Merchant, a Attempt) {
	s.giveBack(ctx, s.attemptLog(m, a), a, lostClaimReleaseBudget)
}

// giveBack ends the lease on a early, so that the reconciler or a client's
// retry takes the attempt at once. It tries for budget and reports whether
// the lease was given back by then; while the database is away (a restart,
// a failover) it goes on trying in the background until the lease would
// have ended anyway.
func (s *Service) giveBack(ctx context.Context, log *slog.Logger, a Attempt, budget time.Duration) bool {
	release := func(ctx context.Context) error {
		return goretry.Do(ctx, goretry.NewConstant(50*time.Millisecond), func(ctx context.Context) error {
			err := s.store.release(ctx, a, s.cfg.Now())
			if ErrorCode(err) == EUNAVAILABLE {
				return goretry.RetryableError(err)
			}
			return err
		})
	}
	detached := context.WithoutCancel(ctx)
	first, cancel := context.WithTimeout(detached, budget)
	err := release(first)
	cancel()
	failed := func(err error) {
		log.WarnContext(ctx, "could not give the lease back; the attempt waits for it to end", "err", err)
	}
	switch {
	case err == nil:
		return true
	case ErrorCode(err) != EUNAVAILABLE && !errors.Is(err, context.DeadlineExceeded):
		failed(err)
		return false
	}
	go func() {
		ctx, cancel := context.WithDeadline(detached, a.LockedUntil)
		defer cancel()
		if err := release(ctx); err != nil {
			failed(err)
		}
	}()
	return false
}

// lostClaimReleaseBudget bounds how long releaseLostClaim delays an error
// answer. The release usually needs a new connection, which a loaded
// database may take a second or more to give.
const lostClaimReleaseBudget = 5 * time.Second

// attemptLog is the logger for work on a: an idempotency key means something
// only within its merchant's scope, so the two go together.
func (s *Service) attemptLog(m Merchant, a Attempt) *slog.Logger {
	return s.log.With("merchant", m.Name, "idempotency_key", a.IdempotencyKey, "attempt_id", a.ID, "attempt", a.Number)
}

// ChargeStatus returns the state of the attempt made with key, or nil when
// this merchant never used the key.
func (s *Service) ChargeStatus(ctx context.Context, m Merchant, key string) (*Result, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	a, ok := s.finished.get(m.ID, key, s.cfg.Now())
	if !ok {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
		defer cancel()
		var err error
		a, err = s.store.get(ctx, m.ID, key)
		if errors.Is(err, errNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		s.finished.put(a)
	}
	r := s.result(a, true)
	return &r, nil
}

// StuckAttempt is a PROCESSING attempt whose lease has expired: its holder is
// gone and the reconciler has not settled it yet.
type StuckAttempt struct {
	Merchant       string
	IdempotencyKey string
	ProviderKey    string
	Amount         int64
	Currency       string
	Attempt        int
	CreatedAt      time.Time
	LeaseEnded     time.Time
}

// StuckAttempts lists up to limit stuck attempts, oldest first.
func (s *Service) StuckAttempts(ctx context.Context, limit int) ([]StuckAttempt, error) {
	return s.store.stuck(ctx, s.cfg.Now(), limit)
}

// CountStuck counts the PROCESSING attempts whose lease has expired.
func (s *Service) CountStuck(ctx context.Context) (int, error) {
	return s.store.countStuck(ctx, s.cfg.Now())
}

// result turns a stored attempt into an answer.
func (s *Service) result(a Attempt, replayed bool) Result {
	r := Result{IdempotencyKey: a.IdempotencyKey, Status: a.Status, ExpiresAt: a.ExpiresAt}
	switch a.Status {
	case StatusSucceeded:
		r.Replayed, r.Charge = replayed, a.Charge
	case StatusFailed:
		r.Replayed, r.Failure = replayed, a.Failure
	default:
		r.RetryAfter = s.retryAfter(a.LockedUntil)
	}
	return r
}

// minRetryAfter keeps clients from polling in a tight loop.
const minRetryAfter = 100 * time.Millisecond

// retryAfter says when a PROCESSING attempt is worth asking about again:
// soon while its holder works on it, and at the next reconcile once the
// lease has ended.
func (s *Service) retryAfter(lockedUntil time.Time) time.Duration {
	d := s.cfg.ReconcileInterval
	if left := lockedUntil.Sub(s.cfg.Now()); left > 0 {
		d = min(s.cfg.PollInterval, left)
	}
	return max(d, minRetryAfter)
}

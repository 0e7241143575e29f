package payment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	goretry "github.com/sethvargo/go-retry"

	"chargeonce/metrics"
	"chargeonce/sqlc"
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
	RetentionDefault         = 24 * time.Hour
	LeaseDefault             = 30 * time.Second
	ReconcileIntervalDefault = 5 * time.Second
	RedriveWindowDefault     = 10 * time.Minute
	StoreTimeoutDefault      = 5 * time.Second
)

// FaultPoint names a point of a charge where a crash is most dangerous.
type FaultPoint string

const (
	FaultAfterClaim    FaultPoint = "after-claim"    // claimed, provider not called yet
	FaultAfterProvider FaultPoint = "after-provider" // provider charged, result not recorded
	FaultAfterFinalize FaultPoint = "after-finalize" // result recorded, response not written
)

// FaultPoints lists every FaultPoint.
var FaultPoints = []FaultPoint{FaultAfterClaim, FaultAfterProvider, FaultAfterFinalize}

func (c Config) withDefaults() Config {
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, ReconcileIntervalDefault)
	c.RedriveWindow = cmp.Or(c.RedriveWindow, RedriveWindowDefault)
	c.StoreTimeout = cmp.Or(c.StoreTimeout, StoreTimeoutDefault)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.ProviderRetries = cmp.Or(c.ProviderRetries, 2)
	c.ProviderRetryBudget = cmp.Or(c.ProviderRetryBudget, 3*time.Second)
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
}

// NewService returns a Service on pool that charges through provider.
func NewService(pool *pgxpool.Pool, provider Provider, cfg Config) *Service {
	cfg = cfg.withDefaults()
	return &Service{store: newStore(pool), provider: instrument(provider, cfg.Metrics), cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics}
}

// finalizeTimeout bounds the write of a provider's answer.
const finalizeTimeout = 10 * time.Second

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
	fingerprint := Fingerprint(in)
	dbCtx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	// Twice at most: a key whose expired result is deleted between our claim
	// and our read is free again, and the second claim takes it.
	for range 2 {
		now := s.cfg.Now()
		id := uuid.New()
		a, claimed, err := s.store.claim(dbCtx, sqlc.ClaimChargeAttemptParams{
			ID:             id,
			MerchantID:     m.ID,
			IdempotencyKey: key,
			Fingerprint:    fingerprint,
			ProviderKey:    "chargeonce_" + id.String(),
			Amount:         in.Amount,
			Currency:       in.Currency,
			PaymentMethod:  in.PaymentMethod,
			OrderID:        optional(in.OrderID),
			Description:    optional(in.Description),
			LockedUntil:    now.Add(s.cfg.Lease),
			ExpiresAt:      now.Add(s.cfg.Retention),
		})
		if err != nil {
			switch code := ErrorCode(err); {
			case code == EUNAVAILABLE && mayHaveRun(err):
				s.releaseLostClaim(ctx, m, key, id)
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
			return s.charge(context.WithoutCancel(ctx), m, a), nil
		}
		row, err := s.store.get(dbCtx, m.ID, key)
		if err == nil {
			return s.answerRetry(ctx, dbCtx, m, row, fingerprint)
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

// answerRetry answers a request whose key is already claimed, from the stored
// attempt row.
func (s *Service) answerRetry(ctx, dbCtx context.Context, m Merchant, row sqlc.GetChargeAttemptRow, fingerprint []byte) (Result, error) {
	a := row.ChargeAttempt
	if string(a.Fingerprint) != string(fingerprint) {
		s.metrics.KeyReused.Inc()
		return Result{}, &Error{Code: EKEYREUSED, Field: "idempotencyKey",
			Message: "this idempotency key was already used with a different request; nothing was charged. Use a new key for a new checkout attempt"}
	}
	if Status(a.Status) != StatusProcessing {
		s.metrics.Replays.Inc()
		return s.result(row, true), nil
	}
	if now := s.cfg.Now(); a.LockedUntil.Before(now) {
		// Nobody holds the attempt. Take it over rather than make the client
		// wait for the reconciler; of several retries, one wins the takeover.
		taken, ok, err := s.store.takeOver(dbCtx, a, now, now.Add(s.cfg.Lease))
		if err != nil {
			return Result{}, err
		}
		if ok {
			s.metrics.RetryTakeovers.Inc()
			log := s.log.With("merchant", m.Name, "idempotency_key", taken.IdempotencyKey, "attempt_id", taken.ID, "attempt", taken.Attempt)
			log.InfoContext(ctx, "retry took over an attempt nobody held")
			return s.resume(context.WithoutCancel(ctx), log, m, taken), nil
		}
		// Another retry or the reconciler took it a moment ago: report theirs.
		if row, err = s.store.get(dbCtx, m.ID, a.IdempotencyKey); err != nil {
			return Result{}, err
		}
		if Status(row.ChargeAttempt.Status) != StatusProcessing {
			s.metrics.Replays.Inc()
			return s.result(row, true), nil
		}
	}
	s.metrics.InFlight.Inc()
	return s.result(row, true), nil
}

// releaseLostClaim handles a claim whose outcome is unknown: the database
// may have committed it and lost only the reply. If it did, the attempt's
// lease belongs to this request, which is about to answer an error; giving
// the lease back at once lets the client's retry take the attempt over
// instead of waiting for the lease to run out. The release is fenced on the
// claim's own id and first attempt number, so it changes nothing if the
// claim never happened or someone has taken the attempt since.
func (s *Service) releaseLostClaim(ctx context.Context, m Merchant, key string, id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lostClaimReleaseBudget)
	defer cancel()
	err := goretry.Do(ctx, goretry.NewConstant(50*time.Millisecond), func(ctx context.Context) error {
		err := s.store.release(ctx, sqlc.ChargeAttempt{ID: id, Attempt: 1}, s.cfg.Now())
		if ErrorCode(err) == EUNAVAILABLE {
			return goretry.RetryableError(err)
		}
		return err
	})
	if err != nil {
		s.log.WarnContext(ctx, "claim outcome unknown and its lease could not be released; a retry waits for the lease to end",
			"merchant", m.Name, "idempotency_key", key, "attempt_id", id, "err", err)
	}
}

// lostClaimReleaseBudget bounds releaseLostClaim, which delays an error
// answer. The release usually needs a new connection, which a loaded
// database may take a second or more to give.
const lostClaimReleaseBudget = 5 * time.Second

// charge calls the provider for a freshly claimed attempt and records the outcome.
func (s *Service) charge(ctx context.Context, m Merchant, a sqlc.ChargeAttempt) Result {
	log := s.log.With("merchant", m.Name, "idempotency_key", a.IdempotencyKey, "attempt_id", a.ID, "attempt", a.Attempt)
	// Finish the provider phase well within the lease, so that the reconciler
	// never takes over an attempt whose holder is still working.
	providerCtx, cancel := context.WithTimeout(ctx, s.cfg.Lease/2)
	pc, err := s.callProvider(providerCtx, m, a)
	cancel()
	if err != nil {
		// Nobody knows yet whether the card was charged. Hand the attempt to
		// the reconciler now rather than when the lease runs out.
		now := s.cfg.Now()
		if err := s.store.release(ctx, a, now); err != nil {
			log.WarnContext(ctx, "could not release the lease; the reconciler takes over when it ends", "err", err)
		} else {
			a.LockedUntil = now
		}
		log.WarnContext(ctx, "provider outcome unknown; attempt stays PROCESSING for the reconciler", "err", err)
		s.metrics.OutcomeUnknown.Inc()
		return s.result(sqlc.GetChargeAttemptRow{ChargeAttempt: a}, false)
	}
	s.cfg.Fault(FaultAfterProvider)
	// The provider has answered, and losing that answer now would leave the
	// attempt to the reconciler for the rest of the lease. A write that fails
	// for a passing reason (a database restart or failover) is retried while
	// the lease holds; that is safe, as the write is fenced on the attempt and
	// a provider charge is recorded at most once.
	writeCtx, cancel := context.WithTimeout(ctx, max(a.LockedUntil.Sub(s.cfg.Now()), finalizeTimeout))
	defer cancel()
	var row sqlc.GetChargeAttemptRow
	err = goretry.Do(writeCtx, goretry.WithCappedDuration(time.Second, goretry.NewExponential(50*time.Millisecond)),
		func(ctx context.Context) error {
			row, err = s.finalize(ctx, a, pc, metrics.ByRequest)
			if code := ErrorCode(err); err != nil && !errors.Is(err, errFenced) && (code == EUNAVAILABLE || code == EINTERNAL) {
				log.WarnContext(ctx, "could not record the provider's answer yet; retrying", "err", err)
				return goretry.RetryableError(err)
			}
			return err
		})
	switch {
	case errors.Is(err, errFenced):
		// Someone else finalized the attempt first; theirs is the stored answer.
		log.InfoContext(ctx, "attempt was finalized by another holder; answering with the stored result")
		if row, err = s.store.get(writeCtx, m.ID, a.IdempotencyKey); err == nil {
			return s.result(row, true)
		}
		fallthrough
	case err != nil:
		// The provider answered but the answer is not stored. The attempt stays
		// PROCESSING; the reconciler asks the provider by our key when the lease ends.
		log.ErrorContext(ctx, "could not record the provider's answer; attempt stays PROCESSING",
			"provider_charge_id", pc.ID, "succeeded", pc.Succeeded, "err", err)
		return s.result(sqlc.GetChargeAttemptRow{ChargeAttempt: a}, false)
	}
	s.cfg.Fault(FaultAfterFinalize)
	log.InfoContext(ctx, "charge attempt finalized", "status", row.ChargeAttempt.Status, "provider_charge_id", pc.ID)
	return s.result(row, false)
}

// finalize records the provider's definitive answer, fenced on a's attempt
// number; by says who finalizes (metrics.ByRequest or ByReconciler).
func (s *Service) finalize(ctx context.Context, a sqlc.ChargeAttempt, pc ProviderCharge, by string) (sqlc.GetChargeAttemptRow, error) {
	expiresAt := s.cfg.Now().Add(s.cfg.Retention)
	var row sqlc.GetChargeAttemptRow
	var err error
	outcome := metrics.BySucceeded
	if pc.Succeeded {
		row, err = s.store.succeed(ctx, a, pc.ID, expiresAt)
	} else {
		outcome = metrics.ByFailed
		row, err = s.store.fail(ctx, a, pc.FailureCode, pc.FailureMessage, expiresAt)
	}
	if err == nil {
		s.metrics.Charges.WithLabelValues(outcome, by).Inc()
	}
	return row, err
}

// settlement is how settle left an attempt.
type settlement struct {
	row    sqlc.GetChargeAttemptRow // the stored attempt, when finalized
	final  bool                     // finalized by this holder
	fenced bool                     // finalized by another holder first
}

// settle drives an attempt that this holder has just taken over (the
// reconciler, or a retry) to a final status: it asks the provider by our
// provider key and records what the provider knows; an attempt the provider
// never saw is sent again under the same key (the provider deduplicates)
// until RedriveWindow after its claim, and fails as provider_unavailable
// after that. When the outcome stays unknown, the attempt stays PROCESSING
// and its lease is given back for the next pass.
func (s *Service) settle(ctx context.Context, log *slog.Logger, m Merchant, a sqlc.ChargeAttempt, by string) settlement {
	pc, err := s.provider.FindCharge(ctx, a.ProviderKey)
	if err != nil {
		s.leaveOpen(ctx, log, a, "the provider lookup failed", err)
		return settlement{}
	}
	reason := "the provider has the charge"
	switch {
	case pc != nil:
	case s.cfg.Now().Sub(a.CreatedAt) >= s.cfg.RedriveWindow:
		reason = "the provider never saw the charge and the redrive window has passed"
		if by == metrics.ByReconciler {
			s.metrics.ReconcilerGiveUps.Inc()
		}
		pc = &ProviderCharge{FailureCode: "provider_unavailable",
			FailureMessage: "The card provider could not be reached; the card was not charged."}
	default:
		reason = "the provider never saw the charge; sent it again under the same provider key"
		if by == metrics.ByReconciler {
			s.metrics.ReconcilerRedrives.Inc()
		}
		got, err := s.provider.CreateCharge(ctx, providerRequest(m, a))
		if err != nil {
			s.leaveOpen(ctx, log, a, "re-sent the charge, outcome still unknown", err)
			return settlement{}
		}
		pc = &got
	}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalizeTimeout)
	defer cancel()
	row, err := s.finalize(writeCtx, a, *pc, by)
	if errors.Is(err, errFenced) {
		log.InfoContext(ctx, "attempt was finalized by another holder; nothing to do")
		return settlement{fenced: true}
	}
	if err != nil {
		s.leaveOpen(ctx, log, a, "could not record the provider's answer", err)
		return settlement{}
	}
	msg := "reconcile: attempt finalized"
	if by == metrics.ByRequest {
		msg = "retry takeover: attempt finalized"
	}
	log.InfoContext(ctx, msg, "status", row.ChargeAttempt.Status, "reason", reason,
		"provider_charge_id", pc.ID, "failure_code", pc.FailureCode)
	return settlement{row: row, final: true}
}

// leaveOpen logs why the attempt stays PROCESSING and gives its lease back,
// so that the next pass or retry takes it at once rather than when the
// lease ends.
func (s *Service) leaveOpen(ctx context.Context, log *slog.Logger, a sqlc.ChargeAttempt, reason string, err error) {
	log.WarnContext(ctx, "attempt stays PROCESSING", "reason", reason, "err", err)
	if err := s.store.release(context.WithoutCancel(ctx), a, s.cfg.Now()); err != nil {
		log.WarnContext(ctx, "could not release the lease", "err", err)
	}
}

// resume settles an attempt a retry has taken over and answers the retry.
func (s *Service) resume(ctx context.Context, log *slog.Logger, m Merchant, a sqlc.ChargeAttempt) Result {
	st := s.settle(ctx, log, m, a, metrics.ByRequest)
	switch {
	case st.final:
		return s.result(st.row, false)
	case st.fenced:
		if row, err := s.store.get(ctx, m.ID, a.IdempotencyKey); err == nil {
			return s.result(row, true)
		}
	}
	// Left open, its lease released: the reconciler's next pass, or the next retry.
	s.metrics.OutcomeUnknown.Inc()
	a.LockedUntil = s.cfg.Now()
	return s.result(sqlc.GetChargeAttemptRow{ChargeAttempt: a}, false)
}

// providerRequest is the charge request for attempt a. It must be the same
// on every send, or the provider refuses the repeat of our key.
func providerRequest(m Merchant, a sqlc.ChargeAttempt) ProviderChargeRequest {
	req := ProviderChargeRequest{
		IdempotencyKey: a.ProviderKey,
		Amount:         a.Amount,
		Currency:       a.Currency,
		PaymentMethod:  a.PaymentMethod,
		Description:    deref(a.Description),
		Metadata:       map[string]string{"client_idempotency_key": a.IdempotencyKey, "merchant": m.Name},
	}
	if a.OrderID != nil {
		req.Metadata["order_id"] = *a.OrderID
	}
	return req
}

// callProvider charges at the provider under our provider key. An unknown
// outcome is retried a few times within the retry budget; that is safe
// because the provider deduplicates on the key.
func (s *Service) callProvider(ctx context.Context, m Merchant, a sqlc.ChargeAttempt) (ProviderCharge, error) {
	req := providerRequest(m, a)
	backoff := goretry.WithMaxDuration(s.cfg.ProviderRetryBudget,
		goretry.WithMaxRetries(s.cfg.ProviderRetries, goretry.NewExponential(200*time.Millisecond)))
	var pc ProviderCharge
	err := goretry.Do(ctx, backoff, func(ctx context.Context) error {
		var err error
		pc, err = s.provider.CreateCharge(ctx, req)
		if errors.Is(err, ErrOutcomeUnknown) {
			return goretry.RetryableError(err)
		}
		return err
	})
	return pc, err
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

// StuckAttempts lists up to max stuck attempts, oldest first.
func (s *Service) StuckAttempts(ctx context.Context, max int) ([]StuckAttempt, error) {
	rows, err := s.store.stuck(ctx, s.cfg.Now(), max)
	if err != nil {
		return nil, err
	}
	out := make([]StuckAttempt, len(rows))
	for i, r := range rows {
		out[i] = StuckAttempt{Merchant: r.MerchantName, IdempotencyKey: r.IdempotencyKey, ProviderKey: r.ProviderKey,
			Amount: r.Amount, Currency: r.Currency, Attempt: int(r.Attempt), CreatedAt: r.CreatedAt, LeaseEnded: r.LockedUntil}
	}
	return out, nil
}

// CountStuck counts the PROCESSING attempts whose lease has expired.
func (s *Service) CountStuck(ctx context.Context) (int, error) {
	return s.store.countStuck(ctx, s.cfg.Now())
}

// ChargeStatus returns the state of the attempt made with key, or nil when
// this merchant never used the key.
func (s *Service) ChargeStatus(ctx context.Context, m Merchant, key string) (*Result, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	row, err := s.store.get(ctx, m.ID, key)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := s.result(row, true)
	return &r, nil
}

// result turns a stored attempt into an answer.
func (s *Service) result(row sqlc.GetChargeAttemptRow, replayed bool) Result {
	a := row.ChargeAttempt
	r := Result{IdempotencyKey: a.IdempotencyKey, Status: Status(a.Status), ExpiresAt: a.ExpiresAt}
	switch r.Status {
	case StatusSucceeded:
		r.Replayed = replayed
		r.Charge = &Charge{
			ID: *a.ChargeID, Amount: a.Amount, Currency: a.Currency, OrderID: deref(a.OrderID),
			ProviderChargeID: deref(row.ProviderChargeID), CreatedAt: *row.ChargeCreatedAt,
		}
	case StatusFailed:
		r.Replayed = replayed
		r.Failure = &Failure{Code: deref(a.FailureCode), Message: deref(a.FailureMessage)}
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

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

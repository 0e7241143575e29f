package payment

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sethvargo/go-retry"

	"chargeonce/sqlc"
)

// Config tunes a Service. Zero values take the defaults.
type Config struct {
	// Retention is how long the stored result of a key is kept (expiresAt).
	Retention time.Duration // default 24h
	// PollInterval is the retryAfter given with a PROCESSING answer.
	PollInterval time.Duration // default 1s
	// ProviderRetries is how many times an unknown provider outcome is retried
	// inline, with the same provider key, before the request answers PROCESSING.
	ProviderRetries uint64 // default 2
	// ProviderRetryBudget bounds the time spent on those inline retries.
	ProviderRetryBudget time.Duration // default 3s
	Logger              *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Retention = cmp.Or(c.Retention, 24*time.Hour)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.ProviderRetries = cmp.Or(c.ProviderRetries, 2)
	c.ProviderRetryBudget = cmp.Or(c.ProviderRetryBudget, 3*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Service charges cards at most once per (merchant, idempotency key).
type Service struct {
	store    *store
	provider Provider
	cfg      Config
	log      *slog.Logger
}

// NewService returns a Service on pool that charges through provider.
func NewService(pool *pgxpool.Pool, provider Provider, cfg Config) *Service {
	cfg = cfg.withDefaults()
	return &Service{store: newStore(pool), provider: provider, cfg: cfg, log: cfg.Logger}
}

// ChargeCard charges the card described by in, once per key: the first
// request with a key claims it and calls the provider; every later one gets
// the stored result (replayed), PROCESSING while the first is still running,
// or EKEYREUSED when its input differs from the first's.
func (s *Service) ChargeCard(ctx context.Context, m Merchant, key string, in ChargeInput) (Result, error) {
	if err := ValidateKey(key); err != nil {
		return Result{}, err
	}
	if err := in.Validate(); err != nil {
		return Result{}, err
	}
	fingerprint := Fingerprint(in)
	id := uuid.New()
	a, claimed, err := s.store.claim(ctx, sqlc.ClaimChargeAttemptParams{
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
		RetentionMs:    s.cfg.Retention.Milliseconds(),
	})
	if err != nil {
		return Result{}, err
	}
	if !claimed {
		return s.replay(ctx, m, key, fingerprint)
	}
	// From here on the attempt is ours and must reach the provider and the
	// database whatever the client does: a client that hangs up must not leave
	// a charge unrecorded.
	return s.charge(context.WithoutCancel(ctx), m, a), nil
}

// replay answers a request whose key was claimed before.
func (s *Service) replay(ctx context.Context, m Merchant, key string, fingerprint []byte) (Result, error) {
	row, err := s.store.get(ctx, m.ID, key)
	if err != nil {
		return Result{}, err
	}
	if string(row.ChargeAttempt.Fingerprint) != string(fingerprint) {
		return Result{}, &Error{Code: EKEYREUSED, Field: "idempotencyKey",
			Message: "this idempotency key was already used with a different request; nothing was charged. Use a new key for a new checkout attempt"}
	}
	return s.result(row, true), nil
}

// charge calls the provider for a freshly claimed attempt and records the outcome.
func (s *Service) charge(ctx context.Context, m Merchant, a sqlc.ChargeAttempt) Result {
	log := s.log.With("merchant", m.Name, "idempotency_key", a.IdempotencyKey, "attempt_id", a.ID)
	pc, err := s.callProvider(ctx, m, a)
	if err != nil {
		log.Warn("provider outcome unknown; attempt stays PROCESSING", "err", err)
		return s.result(sqlc.GetChargeAttemptRow{ChargeAttempt: a}, false)
	}
	var row sqlc.GetChargeAttemptRow
	if pc.Succeeded {
		row, err = s.store.succeed(ctx, a, pc.ID, s.cfg.Retention.Milliseconds())
	} else {
		row, err = s.store.fail(ctx, a, pc.FailureCode, pc.FailureMessage, s.cfg.Retention.Milliseconds())
	}
	switch {
	case errors.Is(err, errFenced):
		// Someone else finalized the attempt first; theirs is the stored answer.
		log.Info("attempt was finalized by another holder; answering with the stored result")
		if row, err = s.store.get(ctx, m.ID, a.IdempotencyKey); err == nil {
			return s.result(row, true)
		}
		fallthrough
	case err != nil:
		// The provider answered but the answer is not stored. The attempt stays
		// PROCESSING; asking the provider by our key will tell the truth later.
		log.Error("could not record the provider's answer; attempt stays PROCESSING",
			"provider_charge_id", pc.ID, "succeeded", pc.Succeeded, "err", err)
		return s.result(sqlc.GetChargeAttemptRow{ChargeAttempt: a}, false)
	}
	log.Info("charge attempt finalized", "status", row.ChargeAttempt.Status, "provider_charge_id", pc.ID)
	return s.result(row, false)
}

// callProvider charges at the provider under our provider key, retrying an
// unknown outcome a few times within the retry budget. Retrying is safe: the
// provider deduplicates on the key.
func (s *Service) callProvider(ctx context.Context, m Merchant, a sqlc.ChargeAttempt) (ProviderCharge, error) {
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
	backoff := retry.WithMaxDuration(s.cfg.ProviderRetryBudget,
		retry.WithMaxRetries(s.cfg.ProviderRetries, retry.NewExponential(200*time.Millisecond)))
	var pc ProviderCharge
	err := retry.Do(ctx, backoff, func(ctx context.Context) error {
		var err error
		pc, err = s.provider.CreateCharge(ctx, req)
		if errors.Is(err, ErrOutcomeUnknown) {
			return retry.RetryableError(err)
		}
		return err
	})
	return pc, err
}

// ChargeStatus returns the state of the attempt made with key, or nil when
// this merchant never used the key.
func (s *Service) ChargeStatus(ctx context.Context, m Merchant, key string) (*Result, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
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
		r.RetryAfter = s.cfg.PollInterval
	}
	return r
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

package payment

import (
	"context"
	"errors"
	"log/slog"
	"time"

	goretry "github.com/sethvargo/go-retry"

	"chargeonce/history"
	"chargeonce/metrics"
)

// holder is who holds an attempt's lease and works on it.
type holder int

const (
	// byRequest: the request that claimed the key, or a retry that took a
	// stuck attempt over.
	byRequest holder = iota + 1
	// byReconciler: a reconciler pass that took a stuck attempt over.
	byReconciler
)

// label is the holder as the metrics name it (the "by" of charges_total).
func (h holder) label() string {
	if h == byReconciler {
		return metrics.ByReconciler
	}
	return metrics.ByRequest
}

// takeover names the holder's takeover in the log.
func (h holder) takeover() string {
	if h == byReconciler {
		return "reconcile"
	}
	return "retry takeover"
}

// How long a holder waits for its release before it answers (the release
// goes on in the background): a request that leaves the outcome unknown,
// and one whose claim's reply was lost. The latter usually needs a new
// connection, which a loaded database may take a second or more to give.
const (
	releaseBudget          = time.Second
	lostClaimReleaseBudget = 5 * time.Second
)

// release releases the holder's lease on a early, so that a is stuck at
// once and the reconciler or a client's retry takes it over, rather than
// when the lease ends. It tries for budget, and returns a as it now stands:
// with its lease ended when the release was written by then. While the
// database is away (a restart, a failover) it goes on trying in the
// background until the lease would have ended anyway. The write is fenced
// on a's fence: it changes nothing once someone else holds a.
//
// The release writes its history row (lease.released, saying why) with
// notes, what its holder learned before it let go; notes that no release
// carried (someone else held a) go to the recorder.
func (s *Service) release(ctx context.Context, log *slog.Logger, a Attempt, budget time.Duration, why string, notes ...history.Entry) Attempt {
	rows := append(notes, s.note(ctx, a, history.LeaseReleased, why))
	write := func(ctx context.Context) error {
		return goretry.Do(ctx, goretry.NewConstant(50*time.Millisecond), func(ctx context.Context) error {
			released, err := s.store.release(ctx, a, s.cfg.Now(), rows)
			if ErrorCode(err) == EUNAVAILABLE {
				return goretry.RetryableError(err)
			}
			if err == nil && !released {
				s.cfg.History.Add(notes...)
			}
			return err
		})
	}
	detached := context.WithoutCancel(ctx)
	first, cancel := context.WithTimeout(detached, budget)
	err := write(first)
	cancel()
	failed := func(err error) {
		s.cfg.History.Add(notes...)
		log.WarnContext(ctx, "could not release the lease; the attempt is stuck once the lease ends", "err", err)
	}
	switch {
	case err == nil:
		a.LockedUntil = s.cfg.Now()
		return a
	case ErrorCode(err) != EUNAVAILABLE && !errors.Is(err, context.DeadlineExceeded):
		failed(err)
		return a
	}
	go func() {
		ctx, cancel := context.WithDeadline(detached, a.LockedUntil)
		defer cancel()
		if err := write(ctx); err != nil {
			failed(err)
		}
	}()
	return a
}

// takeStuck takes over up to limit stuck attempts, each with a lease of
// this holder's.
func (s *Service) takeStuck(ctx context.Context, limit int) ([]Attempt, error) {
	now := s.cfg.Now()
	attempts, err := s.store.takeStuck(ctx, now, now.Add(s.cfg.Lease), limit)
	s.metrics.ReconcilerTakeovers.Add(float64(len(attempts)))
	return attempts, err
}

// StuckAttempt is what operators see of a stuck attempt: PROCESSING, its
// lease ended (its holder died, or released it with the outcome unknown),
// and not taken over yet.
type StuckAttempt struct {
	Merchant       string
	IdempotencyKey string
	ProviderKey    string
	Amount         int64
	Currency       string
	Holders        int // how many holders it had: 1, and one more per takeover
	CreatedAt      time.Time
	LeaseEnded     time.Time
}

// StuckAttempts lists up to limit stuck attempts, oldest first.
func (s *Service) StuckAttempts(ctx context.Context, limit int) ([]StuckAttempt, error) {
	return s.store.stuck(ctx, s.cfg.Now(), limit)
}

// CountStuck counts the stuck attempts.
func (s *Service) CountStuck(ctx context.Context) (int, error) {
	return s.store.countStuck(ctx, s.cfg.Now())
}

// CountWaiting counts the attempts that wait for the shopper to
// authenticate, for the waiting-attempts gauge.
func (s *Service) CountWaiting(ctx context.Context) (int, error) {
	return s.store.countWaiting(ctx)
}

package payment

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// A StoredAnswer is the answer a replay of a settled attempt was given,
// kept in the database by KeepAnswer for the next replay of the same
// request on any instance.
type StoredAnswer struct {
	// Operation names the request's operation, for its metrics and logs.
	Operation string
	// Answer is the answer, as it was given.
	Answer []byte
	// Replay is the replayed attempt: its key, kind and expiry, which is all
	// that Replayed needs (not its terms: CapturesFixed does not apply).
	Replay *Replay
}

// KeepAnswer keeps answer, the answer rendered for a replay of rp's
// attempt to the request that hash identifies among the attempt merchant's
// requests, for StoredAnswer. It returns at once: the answers are written
// in batches, one at a time, and one that is not (the database failed, the
// instance stopped first, too many wait) costs the next replay only its
// rendering.
func (s *Service) KeepAnswer(rp *Replay, hash []byte, operation string, answer []byte) {
	a := rp.attempt
	s.answers.add(storedAnswerRow{merchant: a.MerchantID, hash: hash, attempt: a.ID, kind: a.Kind,
		key: a.IdempotencyKey, expiresAt: a.ExpiresAt, operation: operation, answer: answer})
}

// StoredAnswer reads the answer kept for the merchant's request that hash
// identifies, in one statement by the primary key; false when none is.
// Whether it may still be given is Replayed's to say.
func (s *Service) StoredAnswer(ctx context.Context, merchantID uuid.UUID, hash []byte) (StoredAnswer, bool, error) {
	row, ok, err := s.store.storedAnswer(ctx, merchantID, hash)
	if !ok || err != nil {
		return StoredAnswer{}, false, err
	}
	a := Attempt{ID: row.attempt, Kind: row.kind, MerchantID: merchantID, IdempotencyKey: row.key, ExpiresAt: row.expiresAt}
	return StoredAnswer{Operation: row.operation, Answer: row.answer, Replay: &Replay{attempt: a}}, true, nil
}

// answerWriter writes the answers KeepAnswer is given: the first starts a
// write, and the answers given while it runs make the next one, so that a
// storm of replays writes few statements.
type answerWriter struct {
	write   func(context.Context, []storedAnswerRow) error
	warn    func(err error, answers int)
	mu      sync.Mutex
	pending []storedAnswerRow
	writing bool
}

type storedAnswerRow struct {
	merchant, attempt uuid.UUID
	hash              []byte
	kind              Kind
	key               string
	expiresAt         time.Time
	operation         string
	answer            []byte
}

// maxPendingAnswers bounds the answers waiting for a write: those given
// beyond it, while the database is slow, are not kept.
const maxPendingAnswers = 1_000

func (w *answerWriter) add(row storedAnswerRow) {
	w.mu.Lock()
	if len(w.pending) >= maxPendingAnswers {
		w.mu.Unlock()
		return
	}
	w.pending = append(w.pending, row)
	start := !w.writing
	w.writing = true
	w.mu.Unlock()
	if start {
		go w.drain()
	}
}

// drain writes what is pending until nothing is.
func (w *answerWriter) drain() {
	for {
		w.mu.Lock()
		rows := w.pending
		w.pending = nil
		if len(rows) == 0 {
			w.writing = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := w.write(ctx, rows); err != nil {
			w.warn(err, len(rows))
		}
		cancel()
	}
}

package events

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/payment"
)

// maxNoticeBytes keeps a notice well under PostgreSQL's 8000-byte limit on
// a NOTIFY payload; more attempts than fit are sent as All.
const maxNoticeBytes = 7000

// noticeGather is Notifier.Gather's default: at most a hundred notices a
// second, each as late as that for the other instances (this one's relay
// and watchers are woken in process, at once).
const noticeGather = 10 * time.Millisecond

// Notifier tells whoever waits for events that some committed, without a
// NOTIFY in the transactions that write them: PostgreSQL takes one lock on
// its notification queue at the commit of every notifying transaction and
// holds it through the commit's flush, so a NOTIFY per event serializes
// every commit of an event. The payment service calls Committed right
// after each commit; the Notifier wakes this instance's relay and live
// status at once, in process, and tells the other instances with one
// NOTIFY on db.EventsChannel for all that committed while the previous one
// was being sent or within Gather after it (a transaction that writes
// nothing, so it holds that lock only for an instant; but it takes a
// transaction id, a round trip and a commit: under load, a NOTIFY per
// commit or two would cost nearly as many transactions as the charges'
// own). A notice lost with a dying instance costs the
// others no event: their relays poll, and their watchers read again.
type Notifier struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// ID names this instance in its notices, so that it skips its own.
	ID string
	// Gather is how long the Notifier waits after a NOTIFY before it sends
	// the next, so that the commits of that time share one: what the other
	// instances' relays and watchers may hear later than this one's,
	// default noticeGather.
	Gather time.Duration

	mu      sync.Mutex
	local   []func(db.NoticedAttempt)
	pending map[db.NoticedAttempt]struct{}
	kick    chan struct{}
}

// NewNotifier returns a Notifier that NOTIFYs through pool.
func NewNotifier(pool *pgxpool.Pool, log *slog.Logger) *Notifier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Notifier{pool: pool, log: log.With("component", "notifier"), ID: uuid.NewString(), Gather: noticeGather,
		pending: map[db.NoticedAttempt]struct{}{}, kick: make(chan struct{}, 1)}
}

// OnCommit has f told, in process, of each attempt whose events commit
// here; f must not block.
func (n *Notifier) OnCommit(f func(db.NoticedAttempt)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.local = append(n.local, f)
}

// Committed is payment.Config.EventsCommitted: evs just committed.
func (n *Notifier) Committed(evs []payment.Event) {
	n.mu.Lock()
	local := n.local
	for _, e := range evs {
		n.pending[noticed(e)] = struct{}{}
	}
	n.mu.Unlock()
	for _, e := range evs {
		for _, f := range local {
			f(noticed(e))
		}
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// noticed is the attempt e concerns; a session's event names none, and is
// noticed as the merchant's with no key.
func noticed(e payment.Event) db.NoticedAttempt {
	return db.NoticedAttempt{MerchantID: e.MerchantID, IdempotencyKey: e.IdempotencyKey, KeySession: e.KeySession}
}

// Run sends the pending notices until ctx ends. A NOTIFY that fails is not
// sent again: the others' polls cover it.
func (n *Notifier) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
		payload := n.take()
		sendCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := n.pool.Exec(sendCtx, "SELECT pg_notify($1, $2)", db.EventsChannel, payload)
		cancel()
		if err != nil && ctx.Err() == nil {
			n.log.Warn("could not tell the other instances of committed events; they poll", "err", payment.DBError(err))
		}
		// Let the next commits gather; their kick waits in kick.
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.Gather):
		}
	}
}

// take empties the pending notices into one payload.
func (n *Notifier) take() string {
	n.mu.Lock()
	notice := db.EventsNotice{From: n.ID, Attempts: make([]db.NoticedAttempt, 0, len(n.pending))}
	for a := range n.pending {
		notice.Attempts = append(notice.Attempts, a)
	}
	clear(n.pending)
	n.mu.Unlock()
	b, _ := json.Marshal(notice)
	if len(b) > maxNoticeBytes {
		b, _ = json.Marshal(db.EventsNotice{From: n.ID, All: true})
	}
	return string(b)
}

package providertest

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/google/uuid"

	"chargeonce/payment"
)

// Memory is a payment.Provider that keeps its charges, refunds, captures
// and voids in memory, safe for concurrent use: the card simulator's
// behaviours (chosen by the card, as its tokens choose them) without HTTP
// or a database, for the tests of package payment. Memory passes Run with
// every behaviour offered.
//
// Its observations and controls speak payment's types and plain values
// only, so that payment's own tests, which cannot import this package (it
// imports payment), can name them in an interface of their own.
type Memory struct {
	slowDelay           time.Duration
	refundSettle        time.Duration
	authorizationWindow time.Duration
	now                 func() time.Time

	// mu guards everything below: every decision (a charge of a key, a
	// refund, capture or void of a charge, a challenge pressed, a cancel)
	// is taken whole under it, so that no interleaving decides twice.
	mu          sync.Mutex
	charges     []*memCharge // oldest first
	chargeByID  map[string]*memCharge
	chargeByKey map[string]*memCharge
	refunds     kept[*memRefund]
	captures    kept[*memCapture]
	voids       kept[*memVoid]
	spendNext   int             // how many new keys still to spend (SpendNextKeys)
	spent       map[string]bool // keys whose saved failure is replayed
	sent        []string        // every provider key sent, in order
}

var _ payment.Provider = (*Memory)(nil)

// MemoryOptions tune a Memory. The zero value is ready to use: no slow
// delay, pending refunds that settle after MemoryRefundSettleDefault,
// authorizations open for MemoryAuthorizationWindowDefault, by the wall
// clock.
type MemoryOptions struct {
	// SlowDelay is how long a charge of CardSlow, and each capture of
	// CardCaptureSlow, takes; zero (or less) is none.
	SlowDelay time.Duration
	// RefundSettle is how long a pending refund (CardRefundPending,
	// CardRefundFailsLater) stays pending; zero (or less) is
	// MemoryRefundSettleDefault.
	RefundSettle time.Duration
	// AuthorizationWindow is how long an authorization (a manual charge
	// that succeeded) stays open from then; zero (or less) is
	// MemoryAuthorizationWindowDefault.
	AuthorizationWindow time.Duration
	// Now is the provider's clock, by which refunds settle and
	// authorizations lapse (both are read at every look, with nothing in
	// the background); nil is time.Now. A test hands in its own clock to
	// move them on without waiting.
	Now func() time.Time
}

// MemoryRefundSettleDefault is how long a pending refund of Memory stays
// pending unless configured.
const MemoryRefundSettleDefault = 2 * time.Second

// MemoryAuthorizationWindowDefault is how long an authorization of Memory
// stays open unless configured: a card network's usual hold of a week.
const MemoryAuthorizationWindowDefault = 7 * 24 * time.Hour

// MemoryChallengeURL is the address under which a waiting charge of Memory
// sends the shopper: its Action.URL is MemoryChallengeURL followed by the
// charge's id. Nothing serves it (.invalid): the shopper is a test calling
// PressChallenge with it.
const MemoryChallengeURL = "https://memory.provider.invalid/authenticate/"

// NewMemory returns an empty Memory.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{
		slowDelay:           max(opts.SlowDelay, 0),
		refundSettle:        opts.RefundSettle,
		authorizationWindow: opts.AuthorizationWindow,
		now:                 opts.Now,
		chargeByID:          map[string]*memCharge{},
		chargeByKey:         map[string]*memCharge{},
		refunds:             newKept[*memRefund](),
		captures:            newKept[*memCapture](),
		voids:               newKept[*memVoid](),
		spent:               map[string]bool{},
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.refundSettle <= 0 {
		m.refundSettle = MemoryRefundSettleDefault
	}
	if m.authorizationWindow <= 0 {
		m.authorizationWindow = MemoryAuthorizationWindowDefault
	}
	return m
}

// record notes a send under key.
func (m *Memory) record(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, key)
}

// wait takes d, or until ctx ends (its error).
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newID returns prefix ("ch_", "re_", "cp_", "vd_") and 26 random
// characters: ids nobody can guess, unique across Memories.
func newID(prefix string) string { return prefix + rand.Text() }

// made is what every refund, capture and void of Memory records: its id,
// the charge it is of, and the attempt that sent it.
type made struct {
	id        string
	chargeID  string
	attemptID uuid.UUID
}

func (h *made) head() *made { return h }

// kept holds the refunds (or captures, or voids) of Memory, oldest first
// and by the key each was made under.
type kept[T interface{ head() *made }] struct {
	all   []T
	byKey map[string]T
}

func newKept[T interface{ head() *made }]() kept[T] { return kept[T]{byKey: map[string]T{}} }

func (k *kept[T]) add(key string, v T) {
	k.all = append(k.all, v)
	k.byKey[key] = v
}

// find is the one made under key, or else the oldest of charge chargeID's
// that attempt sent (made under an earlier key); ok is false when there is
// none.
func (k *kept[T]) find(key string, attempt uuid.UUID, chargeID string) (v T, ok bool) {
	if v, ok := k.byKey[key]; ok {
		return v, true
	}
	if attempt == uuid.Nil {
		return v, false
	}
	for _, v := range k.all {
		if h := v.head(); h.chargeID == chargeID && h.attemptID == attempt {
			return v, true
		}
	}
	return v, false
}

// of is every one of charge chargeID's, oldest first.
func (k *kept[T]) of(chargeID string) []T {
	var found []T
	for _, v := range k.all {
		if v.head().chargeID == chargeID {
			found = append(found, v)
		}
	}
	return found
}

// foundIn is what the provider answers of the one of k that find finds;
// nil when there is none.
func foundIn[T interface{ head() *made }, V any](k *kept[T], key string, attempt uuid.UUID, chargeID string, view func(T) V) *V {
	v, ok := k.find(key, attempt, chargeID)
	if !ok {
		return nil
	}
	answer := view(v)
	return &answer
}

// viewsOf is what the provider answers of each of charge chargeID's in k,
// oldest first.
func viewsOf[T interface{ head() *made }, V any](k *kept[T], chargeID string, view func(T) V) []V {
	var views []V
	for _, v := range k.of(chargeID) {
		views = append(views, view(v))
	}
	return views
}

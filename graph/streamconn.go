package graph

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/google/uuid"

	"chargeonce/loop"
	"chargeonce/metrics"
)

// The streams of one instance, and what bounds them: how many a client
// address and a merchant may hold open, how many subscriptions one
// websocket carries, how long a stream lives, and whether its API key
// still authenticates and its page's origin is still registered (checked
// again at each change of keys, merchants or origins, and every
// RecheckInterval). A stream the server ends for these reasons is closed
// with a code its client can act on (RFC 6455 1001 Going Away to
// reconnect; 4403 Forbidden when its key or origin was withdrawn); an
// event stream ends without its complete event, which tells its client to
// ask again.

// Defaults of StreamsConfig, the one place they are written. A checkout
// page opens one stream with one subscription; a merchant's server needs
// a few more, from one address. An hour is far longer than any wait for a
// charge (a shopper has 15 minutes to authenticate), and bounds what an
// idle socket holds. Ten seconds between re-checks keep a revocation that
// no notification told within the 30 s of the cache of authentications.
const (
	StreamMaxPerAddressDefault    = 20
	StreamMaxPerMerchantDefault   = 1_000
	StreamMaxSubscriptionsDefault = 5
	StreamMaxLifetimeDefault      = time.Hour
	StreamRecheckIntervalDefault  = 10 * time.Second
)

// StreamsConfig bounds the websockets and event streams of one instance.
// Zero values take the defaults.
type StreamsConfig struct {
	// MaxPerAddress and MaxPerMerchant bound the streams (websockets and
	// event streams) open at once from one client address, and for one
	// merchant.
	MaxPerAddress  int // default StreamMaxPerAddressDefault
	MaxPerMerchant int // default StreamMaxPerMerchantDefault
	// MaxSubscriptions bounds the subscriptions open at once on one websocket.
	MaxSubscriptions int // default StreamMaxSubscriptionsDefault
	// MaxLifetime is how long a stream lives at most before the server
	// closes it (its client connects again); each lives up to a tenth less,
	// at random.
	MaxLifetime time.Duration // default StreamMaxLifetimeDefault
	// RecheckInterval is how often open streams' keys and origins are
	// checked again when no change was heard of.
	RecheckInterval time.Duration // default StreamRecheckIntervalDefault

	Logger  *slog.Logger     // default: discard
	Metrics *metrics.Metrics // default: instruments nobody scrapes
	// RecheckPasses is told of each re-check pass Run finishes, with its
	// Rechecked as the Result (a test signal); nil tells nobody.
	RecheckPasses *loop.Passes
}

// Close codes of the streams the server ends, beside those of a refused
// connection_init (stream.go). 1001 (Going Away) is the close that every
// graphql-transport-ws client treats as "connect again": graphql-ws retries
// it (as it does 1012 and 1013, but 1000 only while it has subscriptions,
// and not at all before version 5), and RFC 6455 gives it to a server going
// down; a load balancer's connection limit closes the same way.
const closeGoingAway = 1001

// streamRetryAfter is the wait suggested to a client whose stream or
// subscription a cap refused: about a poll of chargeStatus, which it may
// send meanwhile.
const streamRetryAfter = 5 * time.Second

// streamEnd is why the server ends a stream: the close code and reason of a
// websocket, and the label of the metric.
type streamEnd struct {
	code   int
	reason string
	metric string
}

var (
	endLifetime      = streamEnd{closeGoingAway, "this stream reached its maximum lifetime; connect again", "lifetime"}
	endShutdown      = streamEnd{closeGoingAway, "the server is shutting down; connect again", "shutdown"}
	endRevoked       = streamEnd{closeForbidden, "the API key of this stream no longer authenticates", "revoked"}
	endOriginRemoved = streamEnd{closeForbidden, "this page's origin is no longer registered for the merchant", "revoked"}
)

// Streams holds the open streams of a server (websockets, event streams),
// counts them per client address and per merchant, and ties them to the
// server's lifetime: Close ends them all, so that a shutdown does not wait
// for their clients (who subscribe again elsewhere, or poll). Run re-checks
// their keys and origins. Make one with NewStreams.
type Streams struct {
	cfg     StreamsConfig
	log     *slog.Logger
	metrics *metrics.Metrics
	// changed asks Run for a pass now (Changed).
	changed chan struct{}

	mu          sync.Mutex
	conns       map[*streamConn]struct{}
	perAddress  map[string]int
	perMerchant map[uuid.UUID]int
	closed      bool
	// check is the edge that re-checks a stream's key and origin; set by
	// the handler that serves the streams.
	check func(ctx context.Context, id *streamIdentity, p *recheckPass) *streamEnd
}

// NewStreams returns an empty Streams bounded by cfg.
func NewStreams(cfg StreamsConfig) *Streams {
	cfg.MaxPerAddress = cmp.Or(cfg.MaxPerAddress, StreamMaxPerAddressDefault)
	cfg.MaxPerMerchant = cmp.Or(cfg.MaxPerMerchant, StreamMaxPerMerchantDefault)
	cfg.MaxSubscriptions = cmp.Or(cfg.MaxSubscriptions, StreamMaxSubscriptionsDefault)
	cfg.MaxLifetime = cmp.Or(cfg.MaxLifetime, StreamMaxLifetimeDefault)
	cfg.RecheckInterval = cmp.Or(cfg.RecheckInterval, StreamRecheckIntervalDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Discard()
	}
	return &Streams{cfg: cfg, log: cfg.Logger.With("component", "streams"), metrics: cfg.Metrics,
		changed: make(chan struct{}, 1), conns: map[*streamConn]struct{}{},
		perAddress: map[string]int{}, perMerchant: map[uuid.UUID]int{}}
}

// streamConn is one open stream: a websocket or an event stream, from its
// admission at the edge to the end of its request.
type streamConn struct {
	streams *Streams
	remote  string
	// ctx is the stream's: the request's, ended by end (or by release).
	ctx      context.Context
	cancel   context.CancelFunc
	lifetime *time.Timer

	// id is who the stream serves, once its key authenticated; nil until
	// then. Under streams.mu.
	id *streamIdentity

	mu            sync.Mutex
	ws            transport.WebsocketConn // the upgraded websocket; nil for an event stream
	ending        *streamEnd
	released      bool
	subscriptions int
}

// streamIdentity is what a stream is re-checked against: its key (never
// logged), the merchant and key that key authenticated as, and the origin
// of the page that opened it when that origin must stay registered.
type streamIdentity struct {
	requestID    string
	apiKey       string
	merchantID   uuid.UUID
	merchantName string
	keyID        uuid.UUID
	// origin is the page's origin for a publishable key's stream from
	// another origin; "" when no origin is to be checked.
	origin string
}

// streamRefusal is a cap that refused a stream, and its metric's scope.
type streamRefusal struct {
	scope   string
	message string
}

func (r *streamRefusal) Error() string { return r.message }

// open admits a stream from st's client address, under ctx and the
// server's lifetime; a refusal when the address holds its most.
func (s *Streams) open(ctx context.Context, st *requestState) (*streamConn, *streamRefusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perAddress[st.remote] >= s.cfg.MaxPerAddress {
		return nil, &streamRefusal{"stream_address", "this address holds " + strconv.Itoa(s.cfg.MaxPerAddress) +
			" websockets and event streams open, the most one address may; close one (a websocket carries several subscriptions) and connect again"}
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &streamConn{streams: s, remote: st.remote, ctx: ctx, cancel: cancel}
	s.conns[c] = struct{}{}
	s.perAddress[st.remote]++
	s.metrics.Streams.Inc()
	c.lifetime = time.AfterFunc(lifetime(s.cfg.MaxLifetime), func() { c.end(endLifetime) })
	if s.closed {
		c.end(endShutdown)
	}
	return c, nil
}

// lifetime is a stream's: longest, less up to a tenth at random, so that the
// streams opened together (after a deploy, say) do not all reconnect at
// the same moment.
func lifetime(longest time.Duration) time.Duration {
	return longest - rand.N(longest/10+1)
}

// admitMerchant counts c against the merchant that st authenticated, once,
// and records who c serves; a refusal when the merchant holds its most.
// originChecked says the page's origin must stay registered.
func (s *Streams) admitMerchant(c *streamConn, st *requestState, originChecked bool) *streamRefusal {
	if c == nil || st.merchant == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, open := s.conns[c]; !open || c.id != nil {
		return nil
	}
	if s.perMerchant[st.merchant.ID] >= s.cfg.MaxPerMerchant {
		return &streamRefusal{"stream_merchant", "this merchant holds " + strconv.Itoa(s.cfg.MaxPerMerchant) +
			" websockets and event streams open on this server, the most one merchant may; poll chargeStatus, or connect again after retryAfterMs"}
	}
	s.perMerchant[st.merchant.ID]++
	c.id = &streamIdentity{requestID: st.id, apiKey: st.apiKey, merchantID: st.merchant.ID, merchantName: st.merchant.Name, keyID: st.keyID}
	if originChecked {
		c.id.origin = st.origin
	}
	return nil
}

// release forgets c: its request is over.
func (c *streamConn) release() {
	if c == nil {
		return
	}
	c.lifetime.Stop()
	c.cancel()
	c.mu.Lock()
	c.released = true
	c.mu.Unlock()
	s := c.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, open := s.conns[c]; !open {
		return
	}
	delete(s.conns, c)
	if s.perAddress[c.remote]--; s.perAddress[c.remote] <= 0 {
		delete(s.perAddress, c.remote)
	}
	if c.id != nil {
		if s.perMerchant[c.id.merchantID]--; s.perMerchant[c.id.merchantID] <= 0 {
			delete(s.perMerchant, c.id.merchantID)
		}
	}
	s.metrics.Streams.Dec()
}

// upgraded records c's websocket once the upgrade is done; a stream that
// was ended before is closed now.
func (c *streamConn) upgraded(ws transport.WebsocketConn) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.ws = ws
	ending := c.ending
	c.mu.Unlock()
	if ending != nil {
		_ = ws.WriteClose(ending.code, ending.reason)
	}
}

// end ends c for why: a websocket is closed with why's code (gqlgen closes a
// socket whose context ends with 1000 only: the close frame goes first),
// an event stream ends without its complete event. Once only.
func (c *streamConn) end(why streamEnd) {
	c.mu.Lock()
	if c.ending != nil || c.released {
		c.mu.Unlock()
		return
	}
	c.ending = &why
	ws := c.ws
	c.mu.Unlock()
	if ws != nil {
		_ = ws.WriteClose(why.code, why.reason)
	}
	c.cancel()
	c.streams.metrics.StreamsEnded.WithLabelValues(why.metric).Inc()
}

// takeSubscription counts one more subscription on c; false when c carries
// its most. release gives it back, once.
func (c *streamConn) takeSubscription() (release func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subscriptions >= c.streams.cfg.MaxSubscriptions {
		return nil, false
	}
	c.subscriptions++
	return sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.subscriptions--
	}), true
}

// serve sets the check of the streams' keys and origins: the edge's.
func (s *Streams) serve(check func(ctx context.Context, id *streamIdentity, p *recheckPass) *streamEnd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.check = check
}

// Changed asks for a re-check of every open stream now: a key, a merchant
// or an origin changed (merchant.Service.OnChange). It never blocks.
func (s *Streams) Changed() {
	select {
	case s.changed <- struct{}{}:
	default: // a pass is pending already, and covers this change
	}
}

// Run re-checks the open streams at each Changed and every RecheckInterval,
// until ctx ends, on the runner of every background job.
func (s *Streams) Run(ctx context.Context) {
	loop.Runner{Name: "stream re-check", Interval: s.cfg.RecheckInterval, Wake: s.changed, Logger: s.log, Passes: s.cfg.RecheckPasses}.Run(ctx,
		func(ctx context.Context) (loop.Next, error) {
			checked, ended := s.RecheckOnce(ctx)
			return loop.Next{Result: Rechecked{Checked: checked, Ended: ended}}, nil
		})
}

// Rechecked counts what one re-check pass did: the streams it checked,
// and those it ended.
type Rechecked struct{ Checked, Ended int }

// recheckPass remembers, for one pass, what each key and each merchant's
// origin answered: a thousand streams of one publishable key cost one
// lookup.
type recheckPass struct {
	keys    map[string]*streamEnd
	origins map[originOf]bool
}

type originOf struct {
	merchant uuid.UUID
	origin   string
}

// RecheckOnce checks every authenticated stream's key and origin again,
// and ends those whose key no longer authenticates (revoked, or its
// merchant gone) or whose page's origin is no longer registered. A check
// that cannot answer (the database is away) leaves the stream open until
// the next pass. It returns how many streams it checked and ended.
func (s *Streams) RecheckOnce(ctx context.Context) (checked, ended int) {
	type open struct {
		c  *streamConn
		id *streamIdentity
	}
	s.mu.Lock()
	check := s.check
	conns := make([]open, 0, len(s.conns))
	for c := range s.conns {
		if c.id != nil {
			conns = append(conns, open{c, c.id})
		}
	}
	s.mu.Unlock()
	if check == nil {
		return 0, 0
	}
	p := &recheckPass{keys: map[string]*streamEnd{}, origins: map[originOf]bool{}}
	for _, o := range conns {
		if ctx.Err() != nil {
			break
		}
		checked++
		if why := check(ctx, o.id, p); why != nil {
			s.log.InfoContext(ctx, "stream ended: "+why.reason, "request_id", o.id.requestID,
				"remote", o.c.remote, "merchant", o.id.merchantName)
			o.c.end(*why)
			ended++
		}
	}
	return checked, ended
}

// Close ends every stream, at once, and every stream opened from now on,
// with 1001 (Going Away): their clients connect again, to another instance.
func (s *Streams) Close() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*streamConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.end(endShutdown) // synchronously: the connections end before the watchers
	}
}

// upgradeCapture is gqlgen's coder/websocket implementation, handing each
// accepted websocket to the stream its request opened, so that the server
// can close it with a code of its choosing.
type upgradeCapture struct {
	transport.CoderWebsocketImplementation
}

func (u upgradeCapture) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	ws, err := u.CoderWebsocketImplementation.Accept(w, r, opts)
	if err == nil {
		stateFrom(r.Context()).conn.upgraded(ws)
	}
	return ws, err
}

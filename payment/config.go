package payment

import (
	"cmp"
	"log/slog"
	"time"

	"chargeonce/history"
	"chargeonce/metrics"
)

// Config tunes a Service. Zero values take the defaults.
type Config struct {
	// Retention is how long the stored result of a key is kept (expiresAt).
	Retention time.Duration // default 24h
	// Lease is how long the holder of an attempt may work on it before the
	// attempt is stuck, and the reconciler or a retry may take it over. The
	// request's own provider phase ends at half of it.
	Lease time.Duration // default 30s
	// ReconcileInterval is how often the reconciler looks for stuck
	// attempts; a PROCESSING answer whose lease has ended says to come back
	// then.
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
	// SessionMaxAttempts is how many charge attempts a checkout session
	// takes; past it, new ones are ESESSIONLOCKED (card testing).
	SessionMaxAttempts int // default 5
	// AuthenticationWindow is how long an attempt may wait for the shopper
	// to authenticate (3-D Secure), counted from when it began waiting; after
	// it the reconciler cancels the payment at the provider as abandoned.
	AuthenticationWindow time.Duration // default 15m
	// AuthenticationCheckInterval is how often the reconciler reads the
	// provider about an attempt that waits for the shopper. A retry of the
	// key, a poll or a provider's webhook reads it sooner, at most once per
	// AuthenticationRecheck.
	AuthenticationCheckInterval time.Duration // default 15s
	// RefundCheckInterval is how often the reconciler reads a refund that
	// the provider holds pending (REFUND_CHECK_INTERVAL).
	RefundCheckInterval time.Duration // default 30s
	// Production takes https returnUrls only, loopback included: plain
	// http is for a development checkout served on this machine
	// (ValidateReturnURL).
	Production bool
	// LateChargeWatch is how long an attempt failed as provider_unavailable
	// stays watched for a charge that completed at the provider later
	// (LATE_CHARGE_WATCH; late.go).
	LateChargeWatch       time.Duration // default 24h
	AuthenticationRecheck time.Duration // default 1s
	// AuthorizationExpiryWarning is how long before an open authorization
	// lapses its charge.authorization_expiring is written
	// (AUTHORIZATION_EXPIRY_WARNING; authorization.go).
	AuthorizationExpiryWarning time.Duration // default 24h
	// Now is the clock; tests move it.
	Now func() time.Time
	// Fault, when set, is called at each dangerous point of a charge. Only
	// crash tests set it, to kill the process there.
	Fault   func(FaultPoint)
	Logger  *slog.Logger
	Metrics *metrics.Metrics // default: instruments nobody scrapes
	// History records what the engine notes about each key that rides in
	// no write of the ledger's, and names the instance in every row; nil
	// records none of those (the ledger's writes still write theirs).
	History *history.Recorder
	// EventsCommitted is told, right after a transaction commits, of the
	// outbox events it wrote: how the relay and the live status hear of
	// them without a NOTIFY in the writing transaction. It must not block.
	// nil: nobody is told; the relay's poll finds the events.
	EventsCommitted func([]Event)
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
	SessionMaxAttemptsDefault  = 5
	// AuthenticationWindowDefault is 15 minutes: long enough for a bank's
	// challenge (an app to open, a code to type), short enough that a
	// checkout left mid-challenge neither holds its session nor keeps the
	// reconciler asking for long.
	AuthenticationWindowDefault        = 15 * time.Minute
	AuthenticationCheckIntervalDefault = 15 * time.Second
	RefundCheckIntervalDefault         = 30 * time.Second
	LateChargeWatchDefault             = 24 * time.Hour
	AuthenticationRecheckDefault       = time.Second
	// AuthorizationWindowDefault is how long an authorization is taken to
	// last when the provider does not say: 7 days, as card networks hold
	// most.
	AuthorizationWindowDefault = 7 * 24 * time.Hour
	// AuthorizationExpiryWarningDefault is how long before an open
	// authorization lapses charge.authorization_expiring is written.
	AuthorizationExpiryWarningDefault = 24 * time.Hour
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
	c.SessionMaxAttempts = cmp.Or(c.SessionMaxAttempts, SessionMaxAttemptsDefault)
	c.AuthenticationWindow = cmp.Or(c.AuthenticationWindow, AuthenticationWindowDefault)
	c.AuthenticationCheckInterval = cmp.Or(c.AuthenticationCheckInterval, AuthenticationCheckIntervalDefault)
	c.RefundCheckInterval = cmp.Or(c.RefundCheckInterval, RefundCheckIntervalDefault)
	c.LateChargeWatch = cmp.Or(c.LateChargeWatch, LateChargeWatchDefault)
	c.AuthenticationRecheck = cmp.Or(c.AuthenticationRecheck, AuthenticationRecheckDefault)
	c.AuthorizationExpiryWarning = cmp.Or(c.AuthorizationExpiryWarning, AuthorizationExpiryWarningDefault)
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

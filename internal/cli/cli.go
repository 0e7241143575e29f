// Package cli holds chargeonce's operator commands: API keys, webhook
// endpoints, stuck attempts and a reconciler pass on demand, the event
// consumers, and stopping the project-local PostgreSQL. Each opens what it
// needs of a server (internal/app) against the same configuration, and
// prints what an operator reads; a secret is printed only when it is new,
// once, and never logged. ErrUsage names every command of the binary.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/db/localpg"
	"chargeonce/events"
	"chargeonce/graph"
	"chargeonce/history"
	"chargeonce/internal/app"
	"chargeonce/merchant"
	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/webhook"
)

// Run runs the operator command of args (the arguments after the
// binary's name), or answers ErrUsage for one it does not know.
func Run(ctx context.Context, cfg app.Config, args []string, stdout io.Writer, log *slog.Logger) error {
	switch {
	case len(args) >= 1 && args[0] == "apikey":
		return runAPIKeyCommand(ctx, cfg, args[1:], stdout, log)
	case len(args) >= 1 && args[0] == "webhook":
		return runWebhookCommand(ctx, cfg, args[1:], stdout, log)
	case len(args) >= 2 && args[0] == "merchant" && args[1] == "origins":
		return runOriginsCommand(ctx, cfg, args[2:], stdout, log)
	case len(args) == 2 && args[0] == "charges" && args[1] == "stuck":
		return runChargesStuck(ctx, cfg, stdout, log)
	case len(args) == 2 && args[0] == "refunds" && args[1] == "stuck":
		return runRefundsStuck(ctx, cfg, stdout, log)
	case len(args) == 2 && args[0] == "charges" && args[1] == "uncaptured":
		return runChargesUncaptured(ctx, cfg, stdout, log)
	case len(args) == 2 && args[0] == "captures" && args[1] == "stuck":
		return runCapturesStuck(ctx, cfg, stdout, log)
	case len(args) == 3 && args[0] == "charges" && args[1] == "show":
		return runShow(ctx, cfg, payment.KindCharge, args[2], stdout, log)
	case len(args) == 3 && args[0] == "refunds" && args[1] == "show":
		return runShow(ctx, cfg, payment.KindRefund, args[2], stdout, log)
	case len(args) == 3 && args[0] == "captures" && args[1] == "show":
		return runShow(ctx, cfg, payment.KindCapture, args[2], stdout, log)
	case len(args) == 3 && args[0] == "voids" && args[1] == "show":
		return runShow(ctx, cfg, payment.KindVoid, args[2], stdout, log)
	case len(args) == 2 && args[0] == "reconcile" && args[1] == "--once":
		if cfg.Provider == app.ProviderCardsim && cfg.ProviderURL == "" {
			return fmt.Errorf("reconcile --once needs PROVIDER_URL: the card provider to ask (e.g. http://localhost:8080/provider for a running development server), or PROVIDER=stripe")
		}
		return withPayments(ctx, cfg, log, func(svc *payment.Service) error {
			res, err := payment.NewReconciler(svc, payment.ReconcilerConfig{}).RunOnce(ctx)
			fmt.Fprintf(stdout, "taken %d, succeeded %d, failed %d, still processing %d\n", res.Taken, res.Succeeded, res.Failed, res.Open)
			return err
		})
	case len(args) == 2 && args[0] == "consume" && args[1] == "receipts":
		return consume(ctx, cfg, log, func(ctx context.Context, pool *pgxpool.Pool, js jetstream.JetStream) error {
			events.Receipts(pool, log, cfg.Fault).Run(ctx, js)
			return nil
		})
	case len(args) == 2 && args[0] == "consume" && args[1] == "webhooks":
		// What a server runs in process, without the HTTP server.
		return consume(ctx, cfg, log, func(ctx context.Context, pool *pgxpool.Pool, js jetstream.JetStream) error {
			svc, err := webhook.New(pool, js, log, cfg.WebhookConfig(nil))
			if err != nil {
				return err
			}
			svc.Run(ctx)
			return nil
		})
	case len(args) >= 2 && len(args) <= 3 && args[0] == "localdb" && args[1] == "stop":
		dir := filepath.Join(cfg.DataDir, "postgres")
		if len(args) == 3 {
			dir = args[2]
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		return localpg.Stop(ctx, abs)
	default:
		return ErrUsage
	}
}

// consume runs a consumer of the event stream until ctx ends (SIGINT or
// SIGTERM), against the database and the broker the server uses.
func consume(ctx context.Context, cfg app.Config, log *slog.Logger, run func(context.Context, *pgxpool.Pool, jetstream.JetStream) error) error {
	pool, closeDB, err := app.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()
	broker, err := app.OpenBroker(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer broker.Close()
	return run(ctx, pool, broker.JS)
}

// runAPIKeyCommand runs `apikey create|rotate|list|revoke`. A whole key is
// printed only when it is new, once, and never logged.
func runAPIKeyCommand(ctx context.Context, cfg app.Config, args []string, stdout io.Writer, log *slog.Logger) error {
	kind := merchant.KeySecret
	if len(args) == 3 && (args[0] == "create" || args[0] == "rotate") && args[2] == "--publishable" {
		kind, args = merchant.KeyPublishable, args[:2]
	}
	switch {
	case len(args) == 2 && (args[0] == "create" || args[0] == "rotate" || args[0] == "revoke"):
	case len(args) == 1 && args[0] == "list":
	default:
		return ErrUsage
	}
	merchants, closeDB, err := openMerchants(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()
	switch args[0] {
	case "create":
		m, key, err := merchants.CreateAPIKey(ctx, args[1], kind)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s for merchant %s (shown once; only its hash is stored):\n%s\n", upperFirst(keyName(kind)), m.Name, key)
		if kind == merchant.KeyPublishable {
			fmt.Fprintf(stdout, "It may appear in checkout pages; alone it grants nothing. Register their origins with: chargeonce merchant origins add %s <origin>\n", m.Name)
		}
		return nil
	case "rotate":
		m, key, stillValid, err := merchants.RotateAPIKey(ctx, args[1], kind)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "New %s for merchant %s (shown once; only its hash is stored):\n%s\n", keyName(kind), m.Name, key)
		if len(stillValid) == 0 {
			fmt.Fprintf(stdout, "The merchant has no other live %s key.\n", kind)
			return nil
		}
		fmt.Fprintf(stdout, "These %s keys stay valid until you revoke them:\n", kind)
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  PREFIX\tID\tCREATED")
		for _, k := range stillValid {
			fmt.Fprintf(w, "  %s\t%s\t%s\n", k.Prefix, k.ID, k.CreatedAt.UTC().Format(time.RFC3339))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "Once their clients use the new key, retire each with: chargeonce apikey revoke <prefix> (or <id>)")
		return nil
	case "list":
		keys, err := merchants.ListAPIKeys(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tMERCHANT\tKIND\tPREFIX\tCREATED\tREVOKED\tDEV")
		live := 0
		for _, k := range keys {
			revoked := "-"
			if k.RevokedAt != nil {
				revoked = k.RevokedAt.UTC().Format(time.RFC3339)
			} else {
				live++
			}
			dev := "-"
			if k.DevelopmentOnly {
				dev = "yes"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Merchant, k.Kind, k.Prefix, k.CreatedAt.UTC().Format(time.RFC3339), revoked, dev)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d API key(s), %d live\n", len(keys), live)
		return nil
	default: // "revoke"
		k, err := merchants.RevokeAPIKey(ctx, args[1])
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Revoked %s API key %s (id %s) of merchant %s at %s; requests with it are refused from now on.\n",
			k.Kind, k.Prefix, k.ID, k.Merchant, k.RevokedAt.UTC().Format(time.RFC3339))
		return nil
	}
}

// keyName names a key of kind in what the commands print: a secret key is
// the API key, as it always was.
func keyName(kind merchant.KeyKind) string {
	if kind == merchant.KeyPublishable {
		return "publishable key"
	}
	return "API key"
}

func upperFirst(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// openMerchants opens the database the server uses, for the commands on
// merchants, their keys and their origins.
func openMerchants(ctx context.Context, cfg app.Config, log *slog.Logger) (*merchant.Service, func(), error) {
	pool, closeDB, err := app.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	return merchant.NewWithConfig(pool, false, merchant.Config{Production: cfg.Production}), closeDB, nil
}

// runOriginsCommand runs `merchant origins add|list|remove`.
func runOriginsCommand(ctx context.Context, cfg app.Config, args []string, stdout io.Writer, log *slog.Logger) error {
	switch {
	case len(args) == 3 && (args[0] == "add" || args[0] == "remove"):
	case (len(args) == 1 || len(args) == 2) && args[0] == "list":
	default:
		return ErrUsage
	}
	merchants, closeDB, err := openMerchants(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()
	switch args[0] {
	case "add":
		origin, added, err := merchants.AddOrigin(ctx, args[1], args[2])
		if err != nil {
			return err
		}
		if !added {
			fmt.Fprintf(stdout, "Merchant %s already has the origin %s.\n", args[1], origin)
			return nil
		}
		fmt.Fprintf(stdout, "Added origin %s for merchant %s: its publishable keys may be used from pages there.\n", origin, args[1])
		return nil
	case "remove":
		origin, err := merchants.RemoveOrigin(ctx, args[1], args[2])
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Removed origin %s of merchant %s: cross-origin requests from it are refused from now on.\n", origin, args[1])
		return nil
	default: // "list"
		name := ""
		if len(args) == 2 {
			name = args[1]
		}
		origins, err := merchants.ListOrigins(ctx, name)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "MERCHANT\tORIGIN\tADDED")
		for _, o := range origins {
			fmt.Fprintf(w, "%s\t%s\t%s\n", o.Merchant, o.Origin, o.CreatedAt.UTC().Format(time.RFC3339))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d origin(s)\n", len(origins))
		return nil
	}
}

// ErrUsage answers a command line that names no command chargeonce has;
// its text lists them all.
var ErrUsage = errors.New(`usage:
  chargeonce serve                    serve the API (configuration from the environment; see docs/operators.md)
  chargeonce apikey create NAME [--publishable]
                                      create merchant NAME if needed and print a new secret (or publishable) key for it
  chargeonce apikey rotate NAME [--publishable]
                                      print a new secret (or publishable) key for merchant NAME; its others stay valid until revoked
  chargeonce apikey list              list every merchant's API keys (id, kind, prefix, created, revoked; never the key)
  chargeonce apikey revoke PREFIX|ID  revoke one API key of either kind, by its id or the prefix of exactly one live key
  chargeonce merchant origins add NAME ORIGIN
                                      let merchant NAME's checkout pages on ORIGIN (scheme://host[:port]) call the API
  chargeonce merchant origins list [NAME]
                                      list the registered origins, of NAME or of every merchant
  chargeonce merchant origins remove NAME ORIGIN
                                      stop serving cross-origin requests from ORIGIN for merchant NAME
  chargeonce webhook set NAME URL     register (or replace) merchant NAME's webhook endpoint and print its new signing secret
  chargeonce webhook list             list the webhook endpoints (merchant, URL, created; never the secret)
  chargeonce webhook remove NAME      remove merchant NAME's webhook endpoint; its pending deliveries are not sent
  chargeonce webhook deliveries NAME [--limit N]
                                      merchant NAME's webhook attempts, newest first (default 50)
  chargeonce charges show KEY         what happened under charge key KEY, as a timeline: every request that reached it,
                                      each provider call, each change of holder, the event and its webhook attempts
  chargeonce refunds show KEY         the same for refund key KEY
  chargeonce captures show KEY        the same for capture key KEY
  chargeonce voids show KEY           the same for void key KEY
  chargeonce charges stuck            list the stuck attempts: PROCESSING, their lease ended
  chargeonce refunds stuck            list the refunds left PROCESSING: in flight, stuck, or only read at the provider
  chargeonce charges uncaptured       list the open authorizations (MANUAL charges neither captured in full, voided
                                      nor expired), oldest first, with what is captured and when each lapses
  chargeonce captures stuck           list the captures and voids left PROCESSING: in flight, stuck, or only read
  chargeonce reconcile --once         run one reconciler pass now (needs PROVIDER=stripe, or PROVIDER_URL: a running server's simulator)
  chargeonce consume receipts         issue a receipt per successful charge from the event stream (durable consumer "receipts")
  chargeonce consume webhooks         deliver the merchants' webhooks (durable consumer "webhooks"), as every server also does
  chargeonce localdb stop [DIR]       stop the project-local PostgreSQL in DIR (default DATA_DIR/postgres)
  chargeonce help                     print this`)

// withPayments runs fn with a payment service on the configured database,
// as the operator commands that read or finish attempts need it.
func withPayments(ctx context.Context, cfg app.Config, log *slog.Logger, fn func(*payment.Service) error) error {
	pool, closeDB, err := app.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()
	return fn(app.NewPaymentService(cfg, pool, app.NewProvider(cfg, cfg.ProviderURL, nil, log), log, metrics.Discard(), nil, nil))
}

// listing prints a table of the operator commands: header, a row per item
// (row writes it, tab-separated), then how many there are (total, with %d).
func listing[T any](stdout io.Writer, header string, items []T, row func(w io.Writer, item T), total string) error {
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	for _, it := range items {
		row(w, it)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, total+"\n", len(items))
	return nil
}

// leaseState says why an attempt left PROCESSING is: only read at the
// provider since pendingSince (then pendingNote, if any), stuck since its
// lease ended, or held until it ends.
func leaseState(lockedUntil, pendingSince, now time.Time, pendingNote string) string {
	switch {
	case !pendingSince.IsZero():
		return "only read at the provider since " + pendingSince.UTC().Format(time.RFC3339) + pendingNote
	case lockedUntil.Before(now):
		return "stuck since " + lockedUntil.UTC().Format(time.RFC3339)
	}
	return "held until " + lockedUntil.UTC().Format(time.RFC3339)
}

// runChargesStuck lists the stuck charge attempts: PROCESSING, their lease
// ended.
func runChargesStuck(ctx context.Context, cfg app.Config, stdout io.Writer, log *slog.Logger) error {
	return withPayments(ctx, cfg, log, func(svc *payment.Service) error {
		stuck, err := svc.StuckAttempts(ctx, 1000)
		if err != nil {
			return err
		}
		return listing(stdout, "MERCHANT\tIDEMPOTENCY KEY\tPROVIDER KEY\tAMOUNT\tHOLDERS\tCREATED\tLEASE ENDED", stuck, func(w io.Writer, a payment.StuckAttempt) {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d %s\t%d\t%s\t%s\n", a.Merchant, a.IdempotencyKey, a.ProviderKey,
				a.Amount, a.Currency, a.Holders, a.CreatedAt.UTC().Format(time.RFC3339), a.LeaseEnded.UTC().Format(time.RFC3339))
		}, "%d stuck attempt(s)")
	})
}

// runRefundsStuck lists the refunds left PROCESSING, oldest first: why each
// is (only read at the provider since when, or when its lease ends or ended)
// and what it refunds.
func runRefundsStuck(ctx context.Context, cfg app.Config, stdout io.Writer, log *slog.Logger) error {
	return withPayments(ctx, cfg, log, func(svc *payment.Service) error {
		refunds, err := svc.ProcessingRefunds(ctx, 1000)
		if err != nil {
			return err
		}
		now := time.Now()
		return listing(stdout, "MERCHANT\tIDEMPOTENCY KEY\tCHARGE\tPROVIDER CHARGE\tAMOUNT\tHOLDERS\tCREATED\tSTATE", refunds, func(w io.Writer, r payment.ProcessingRefund) {
			state := leaseState(r.LockedUntil, r.PendingSince, now, " (pending there, or not shown within the redrive window)")
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d %s\t%d\t%s\t%s\n", r.Merchant, r.IdempotencyKey, r.ChargeID, r.ProviderChargeID,
				r.Amount, r.Currency, r.Holders, r.CreatedAt.UTC().Format(time.RFC3339), state)
		}, "%d refund(s) PROCESSING")
	})
}

// runChargesUncaptured lists the open authorizations, oldest first: what
// each authorized and captured, and when it lapses.
func runChargesUncaptured(ctx context.Context, cfg app.Config, stdout io.Writer, log *slog.Logger) error {
	return withPayments(ctx, cfg, log, func(svc *payment.Service) error {
		open, err := svc.OpenAuthorizations(ctx, 1000)
		if err != nil {
			return err
		}
		now := time.Now()
		return listing(stdout, "MERCHANT\tCHARGE\tPROVIDER CHARGE\tORDER\tAUTHORIZED\tCAPTURED\tCREATED\tEXPIRES", open, func(w io.Writer, a payment.OpenAuthorization) {
			expires := a.ExpiresAt.UTC().Format(time.RFC3339)
			if left := a.ExpiresAt.Sub(now); left > 0 {
				expires += " (in " + left.Round(time.Minute).String() + ")"
			} else {
				expires += " (lapsed; the reconciler reads the provider)"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d %s\t%d\t%s\t%s\n", a.Merchant, a.ChargeID, a.ProviderChargeID, a.OrderID,
				a.Amount, a.Currency, a.Captured, a.CreatedAt.UTC().Format(time.RFC3339), expires)
		}, "%d open authorization(s)")
	})
}

// runCapturesStuck lists the captures and voids left PROCESSING, oldest
// first: why each is, and what it captures or voids.
func runCapturesStuck(ctx context.Context, cfg app.Config, stdout io.Writer, log *slog.Logger) error {
	return withPayments(ctx, cfg, log, func(svc *payment.Service) error {
		captures, err := svc.ProcessingCaptures(ctx, 1000)
		if err != nil {
			return err
		}
		now := time.Now()
		return listing(stdout, "KIND\tMERCHANT\tIDEMPOTENCY KEY\tPROVIDER KEY\tCHARGE\tAMOUNT\tFINAL\tHOLDERS\tCREATED\tSTATE", captures, func(w io.Writer, c payment.ProcessingCapture) {
			final := "-"
			if c.Kind == payment.KindCapture {
				final = strconv.FormatBool(c.Final)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d %s\t%s\t%d\t%s\t%s\n", c.Kind, c.Merchant, c.IdempotencyKey, c.ProviderKey, c.ChargeID,
				c.Amount, c.Currency, final, c.Holders, c.CreatedAt.UTC().Format(time.RFC3339), leaseState(c.LockedUntil, c.PendingSince, now, ""))
		}, "%d capture(s) and void(s) PROCESSING")
	})
}

// runShow prints the history of key of kind, of every merchant that used
// it, as a timeline: when, how long after the first row, what, the status
// after it, where and for which request and trace.
func runShow(ctx context.Context, cfg app.Config, kind payment.Kind, key string, stdout io.Writer, log *slog.Logger) error {
	return withPayments(ctx, cfg, log, func(svc *payment.Service) error {
		all, err := svc.KeyHistories(ctx, kind, key)
		if err != nil {
			return err
		}
		if len(all) == 0 {
			fmt.Fprintf(stdout, "no history for %s key %q: never used, or forgotten with its result (KEY_RETENTION)\n", kind, key)
			return nil
		}
		for i, h := range all {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "merchant %s, %s key %s\n", h.Merchant.Name, kind, key)
			start := h.Events[0].At
			err := listing(stdout, "AT\tAFTER\tWHAT\tSTATUS\tINSTANCE\tREQUEST\tTRACE\tDETAIL", h.Events, func(w io.Writer, e history.Event) {
				what, detail := e.Type, graph.HistoryDetail(e.Detail)
				if history.Counted(e.Type) {
					what = fmt.Sprintf("%s ×%d", e.Type, e.Count)
					detail = fmt.Sprintf("the first %s, the last %s after the first row", after(e.At, start), after(e.LastAt, start))
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format("2006-01-02T15:04:05.000Z"), after(e.At, start),
					what, dash(e.Status), dash(e.Instance), dash(e.RequestID), dash(e.TraceID), detail)
			}, "%d row(s)")
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// after is how long after start t is, to the millisecond.
func after(t, start time.Time) string {
	return "+" + t.Sub(start).Round(time.Millisecond).String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

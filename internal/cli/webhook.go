package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"chargeonce/internal/app"
	"chargeonce/webhook"
)

// runWebhookCommand runs `webhook set|list|remove|deliveries`. A signing
// secret is printed only when it is new, once, and never logged.
func runWebhookCommand(ctx context.Context, cfg app.Config, args []string, stdout io.Writer, log *slog.Logger) error {
	limit := deliveriesLimitDefault
	switch {
	case len(args) == 3 && args[0] == "set":
	case len(args) == 1 && args[0] == "list":
	case len(args) == 2 && args[0] == "remove":
	case len(args) >= 2 && args[0] == "deliveries":
		var err error
		if limit, err = deliveriesLimit(args[2:]); err != nil {
			return err
		}
	default:
		return ErrUsage
	}
	pool, closeDB, err := app.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()
	endpoints := webhook.NewEndpoints(pool, cfg.WebhookConfig(nil))
	switch args[0] {
	case "set":
		e, secret, err := endpoints.Set(ctx, args[1], args[2])
		if err != nil {
			return err
		}
		verb := "Registered"
		if !e.UpdatedAt.Equal(e.CreatedAt) {
			verb = "Replaced"
		}
		fmt.Fprintf(stdout, "%s the webhook endpoint of merchant %s: %s\n", verb, e.Merchant, e.URL)
		fmt.Fprintf(stdout, "Signing secret (shown once; give it to the receiver, which checks the %s header with it):\n%s\n",
			webhook.SignatureHeader, secret)
		if verb == "Replaced" {
			fmt.Fprintln(stdout, "The previous secret signs nothing from now on; pending deliveries go to this URL with the new secret.")
		}
		return nil
	case "list":
		list, err := endpoints.List(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "MERCHANT\tURL\tCREATED\tUPDATED")
		for _, e := range list {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.Merchant, e.URL, e.CreatedAt.UTC().Format(time.RFC3339), e.UpdatedAt.UTC().Format(time.RFC3339))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d webhook endpoint(s)\n", len(list))
		return nil
	case "remove":
		e, pending, err := endpoints.Remove(ctx, args[1])
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Removed the webhook endpoint of merchant %s (%s) and its delivery log; %d pending deliveries will not be sent.\n",
			e.Merchant, e.URL, pending)
		return nil
	default: // "deliveries"
		e, entries, err := endpoints.Deliveries(ctx, args[1], limit)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Deliveries to the webhook endpoint of merchant %s (%s), newest first:\n", args[1], e.URL)
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "EVENT\tTYPE\tATTEMPT\tSTARTED\tDURATION\tSTATE\tNEXT ATTEMPT\tRESULT")
		for _, l := range entries {
			attempt, started, duration, result := "-", "-", "-", "-"
			if l.Attempt > 0 {
				attempt = strconv.Itoa(l.Attempt)
				started = l.StartedAt.UTC().Format(time.RFC3339)
				duration = l.Duration.String()
				result = l.Error
				if l.HTTPStatus != 0 {
					result = "HTTP " + strconv.Itoa(l.HTTPStatus)
				}
			}
			next := "-"
			if !l.NextAttemptAt.IsZero() {
				next = l.NextAttemptAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.EventID, l.EventType, attempt, started, duration, l.State, next, result)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d row(s)\n", len(entries))
		return nil
	}
}

// deliveriesLimitDefault is how many rows `webhook deliveries` shows
// without --limit.
const deliveriesLimitDefault = 50

// deliveriesLimit reads `--limit N` (or --limit=N) of `webhook deliveries`.
func deliveriesLimit(args []string) (int, error) {
	var v string
	switch {
	case len(args) == 0:
		return deliveriesLimitDefault, nil
	case len(args) == 2 && args[0] == "--limit":
		v = args[1]
	case len(args) == 1 && strings.HasPrefix(args[0], "--limit="):
		v = strings.TrimPrefix(args[0], "--limit=")
	default:
		return 0, ErrUsage
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 10000 {
		return 0, fmt.Errorf("--limit must be a whole number from 1 to 10000, got %q", v)
	}
	return n, nil
}

package chaos

import (
	"fmt"
	"strings"
	"time"

	"chargeonce/internal/markdown"
)

// Report is what a chaos run found.
type Report struct {
	Short    bool          `json:"short"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Kills    []*Kill       `json:"kills"`

	// Checkouts are the keys the clients sent: fresh ones and storms'.
	Checkouts int `json:"checkouts"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// Storms are keys sent by 12 clients at once; Replays are sends of a
	// key again after its final answer.
	Storms  int `json:"storms"`
	Replays int `json:"replays"`
	// Tries are requests, of checkouts, refunds, captures and voids,
	// answered with an error, a dropped connection or PROCESSING, each
	// followed by a retry with the same key.
	Tries int `json:"retried_tries"`
	// LongestWait is the longest a client, of any key, waited from its
	// first request to a final answer.
	LongestWait time.Duration `json:"longest_wait_ns"`
	// Failover is the time from the primary's kill to the standby's
	// promotion.
	Failover time.Duration `json:"failover_ns"`
	// Held are the checkouts the killed instance held the lease of (a slow
	// card's provider call under way), and HeldLongest the longest of them
	// from its first request to a final answer.
	Held        int           `json:"held_at_kill"`
	HeldLongest time.Duration `json:"held_longest_ns"`

	// Lost are keys whose stored state is not what a client was told;
	// Changed are answers, of checkouts and refunds, that differ from what
	// another client of the key was told; Doubled are keys the provider
	// charged more than once.
	Lost    int `json:"lost"`
	Changed int `json:"changed"`
	Doubled int `json:"doubled"`

	// The refund load took succeeded charges and refunded part of each:
	// RefundSingles with one partial refund, RefundRaces with two at once
	// that together exceed the charge (each under its own key), and
	// RefundStorms with one partial refund sent by several clients at once.
	RefundSingles int `json:"refund_singles"`
	RefundRaces   int `json:"refund_races"`
	RefundStorms  int `json:"refund_storms"`
	// Refunds are the refund keys sent; RefundsSucceeded those answered
	// SUCCEEDED, RefundsRefused those refused with REFUND_EXCEEDS_CHARGE.
	Refunds          int `json:"refunds"`
	RefundsSucceeded int `json:"refunds_succeeded"`
	RefundsRefused   int `json:"refunds_refused"`
	// ProviderRefunds are the provider's refunds (succeeded or pending) of
	// the refunded charges: one per succeeded refund key.
	ProviderRefunds int `json:"provider_refunds"`
	// RefundsLost are refund keys whose stored state is not what a client
	// was told; RefundedTwice are refund keys the provider refunded more
	// than once; RefundedBeyond are charges refunded, in chargeonce or at
	// the provider, by more than they charged.
	RefundsLost    int `json:"refunds_lost"`
	RefundedTwice  int `json:"refunded_twice"`
	RefundedBeyond int `json:"refunded_beyond"`

	// The capture load took succeeded authorizations (captureMethod
	// MANUAL) and: CaptureParts captured each in two parts, one not final,
	// then a final one; CaptureFulls in full, by a same-key storm;
	// CaptureRaces by two captures at once (not final) that together
	// exceed the authorization; VoidStorms voided each, by a same-key
	// storm; CaptureVoidRaces raced a capture in full and a void.
	CaptureParts     int `json:"capture_parts"`
	CaptureFulls     int `json:"capture_fulls"`
	CaptureRaces     int `json:"capture_races"`
	VoidStorms       int `json:"void_storms"`
	CaptureVoidRaces int `json:"capture_void_races"`
	// Captures and Voids are the capture and void keys sent: answered
	// SUCCEEDED, FAILED (a capture the card declined), or refused before
	// anything was claimed (CAPTURE_EXCEEDS_AUTHORIZATION,
	// CHARGE_NOT_CAPTURABLE, CHARGE_VOIDED, CHARGE_CAPTURED).
	Captures          int `json:"captures"`
	CapturesSucceeded int `json:"captures_succeeded"`
	CapturesFailed    int `json:"captures_failed"`
	CapturesRefused   int `json:"captures_refused"`
	Voids             int `json:"voids"`
	VoidsSucceeded    int `json:"voids_succeeded"`
	VoidsRefused      int `json:"voids_refused"`
	// HeldCaptures are the captures the killed instance held the lease of
	// (a slow capture under way), and HeldCapturesLongest the longest of
	// them from its first request to a final answer.
	HeldCaptures        int           `json:"held_captures_at_kill"`
	HeldCapturesLongest time.Duration `json:"held_captures_longest_ns"`
	// ProviderCaptures are the provider's captures (made) of the captured
	// authorizations, one per succeeded capture key; ProviderVoids its
	// voids, one per succeeded void key.
	ProviderCaptures int `json:"provider_captures"`
	ProviderVoids    int `json:"provider_voids"`
	// CapturesLost are capture and void keys whose stored state is not what
	// a client was told; CapturedTwice are capture keys the provider
	// captured more than once; CapturedBeyond are authorizations captured,
	// in chargeonce or at the provider, above their amount;
	// CapturedAndVoided are authorizations both captured and voided.
	CapturesLost      int `json:"captures_lost"`
	CapturedTwice     int `json:"captured_twice"`
	CapturedBeyond    int `json:"captured_beyond"`
	CapturedAndVoided int `json:"captured_and_voided"`

	Events         int `json:"events"`
	Receipts       int `json:"receipts"`
	StreamMessages int `json:"stream_messages"`
	StreamReplicas int `json:"stream_replicas"`

	// Problems are the broken guarantees, one line each; none is a pass.
	Problems []string `json:"problems"`
}

// problem records a broken guarantee; the checks run one at a time.
func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Markdown is the report as the README and results.md show it.
func (r *Report) Markdown() string {
	var b strings.Builder
	kind := "full"
	if r.Short {
		kind = "short"
	}
	fmt.Fprintf(&b, "Latest %s chaos run: %s, %s of load; three instances (PROCESSING_LEASE=10s), a pg_auto_failover formation (monitor, primary, synchronous standby), three NATS nodes (CHARGES with 3 replicas), the receipts consumer.\n\n",
		kind, r.Started.Format("2006-01-02 15:04 UTC"), round(r.Duration))
	b.WriteString("| killed (SIGKILL) | how it came back | kill → first successful charge |\n|---|---|---:|\n")
	for _, k := range r.Kills {
		first := "none"
		if k.FirstSuccess > 0 {
			first = round(k.FirstSuccess).String()
		}
		fmt.Fprintf(&b, "| %s (%s) | %s | %s |\n", k.What, k.Part, k.Recovery, first)
	}
	b.WriteString("\n| figure | value |\n|---|---:|\n")
	for _, row := range [][2]string{
		{"checkouts (keys)", fmt.Sprint(r.Checkouts)},
		{"succeeded / failed (declined card)", fmt.Sprintf("%d / %d", r.Succeeded, r.Failed)},
		{"same-key storms (12 clients each) / replays", fmt.Sprintf("%d / %d", r.Storms, r.Replays)},
		{"tries retried with the same key (error, dropped connection, PROCESSING), of checkouts, refunds, captures and voids", fmt.Sprint(r.Tries)},
		{"failover: primary killed → standby promoted", round(r.Failover).String()},
		{"longest a client waited for a final answer", round(r.LongestWait).String()},
		{"checkouts the killed instance held (slow card, lease held) / longest until final", fmt.Sprintf("%d / %s", r.Held, round(r.HeldLongest))},
		{"**charges lost** (stored state differs from an answer)", fmt.Sprintf("**%d**", r.Lost)},
		{"**charges doubled** (more than one provider charge for a key)", fmt.Sprintf("**%d**", r.Doubled)},
		{"answers changed between clients of one key", fmt.Sprint(r.Changed)},
		{fmt.Sprintf("refunded charges: one partial refund / two at once, together beyond the charge / a same-key storm (%d clients)", refundStormClients),
			fmt.Sprintf("%d / %d / %d", r.RefundSingles, r.RefundRaces, r.RefundStorms)},
		{"refunds (keys): succeeded / refused (REFUND_EXCEEDS_CHARGE)", fmt.Sprintf("%d: %d / %d", r.Refunds, r.RefundsSucceeded, r.RefundsRefused)},
		{"provider refunds (one per succeeded refund key)", fmt.Sprint(r.ProviderRefunds)},
		{"**refunds lost** (stored state differs from an answer)", fmt.Sprintf("**%d**", r.RefundsLost)},
		{"**refunded twice** (more than one provider refund for a refund key)", fmt.Sprintf("**%d**", r.RefundedTwice)},
		{"**refunded beyond the charge** (charges refunded by more than they charged)", fmt.Sprintf("**%d**", r.RefundedBeyond)},
		{fmt.Sprintf("authorizations: captured in two parts / in full by a same-key storm (%d clients) / by two captures at once, together beyond it / voided by a same-key storm / a capture and a void at once", captureStormClients),
			fmt.Sprintf("%d / %d / %d / %d / %d", r.CaptureParts, r.CaptureFulls, r.CaptureRaces, r.VoidStorms, r.CaptureVoidRaces)},
		{"captures (keys): succeeded / failed (declined by the card) / refused (nothing claimed)",
			fmt.Sprintf("%d: %d / %d / %d", r.Captures, r.CapturesSucceeded, r.CapturesFailed, r.CapturesRefused)},
		{"voids (keys): succeeded / refused (nothing claimed)", fmt.Sprintf("%d: %d / %d", r.Voids, r.VoidsSucceeded, r.VoidsRefused)},
		{"captures the killed instance held (slow capture, lease held) / longest until final", fmt.Sprintf("%d / %s", r.HeldCaptures, round(r.HeldCapturesLongest))},
		{"provider captures / voids (one per succeeded key)", fmt.Sprintf("%d / %d", r.ProviderCaptures, r.ProviderVoids)},
		{"**captures and voids lost** (stored state differs from an answer)", fmt.Sprintf("**%d**", r.CapturesLost)},
		{"**double captures** (more than one provider capture for a capture key)", fmt.Sprintf("**%d**", r.CapturedTwice)},
		{"**captures above an authorization** (authorizations captured beyond their amount)", fmt.Sprintf("**%d**", r.CapturedBeyond)},
		{"**captured and voided** (authorizations with both a capture and a void)", fmt.Sprintf("**%d**", r.CapturedAndVoided)},
		{"events / stream messages (copies each)", fmt.Sprintf("%d / %d (%d)", r.Events, r.StreamMessages, r.StreamReplicas)},
		{"receipts (one per succeeded key)", fmt.Sprint(r.Receipts)},
		{"problems found", fmt.Sprint(len(r.Problems))},
	} {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	for _, p := range r.Problems[:min(len(r.Problems), 20)] {
		fmt.Fprintf(&b, "\n- problem: %s", p)
	}
	if len(r.Problems) > 20 {
		fmt.Fprintf(&b, "\n- … and %d more", len(r.Problems)-20)
	}
	return b.String()
}

// The README shows the latest full run between these markers.
const (
	readmeBegin = "<!-- chaos:begin -->"
	readmeEnd   = "<!-- chaos:end -->"
)

// Write saves the report as results.md and results.json in dir.
func (r *Report) Write(dir string) error {
	return markdown.WriteResults(dir, r, "# chargeonce chaos run\n\n"+r.Markdown()+"\n")
}

// UpdateReadme shows the report in the README at path.
func (r *Report) UpdateReadme(path string) error {
	return markdown.UpdateFile(path, readmeBegin, readmeEnd, r.Markdown())
}

// Package chaos is chargeonce's chaos run: bounded loopback load (fresh
// checkouts, same-key storms, replays, refunds of part of what was charged,
// and authorizations captured in parts or in full, or voided, some with a
// capture and a void racing) against a three-instance cluster while, in
// turn, the PostgreSQL primary, a NATS node and an instance are killed
// with SIGKILL; then it checks that every key is final, that no answer a
// client got was lost or changed, that the provider charged each succeeded
// key once and no failed one, that it refunded each succeeded refund key
// once and no charge beyond what it was charged, that it captured each
// succeeded capture key once and no authorization beyond its amount, never
// both captured and voided, and that the receipts consumer issued each
// succeeded charge's receipt exactly once.
package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"chargeonce/internal/apiclient"
	"chargeonce/lab/cluster"
)

// Options configures Run.
type Options struct {
	// Binary is the chargeonce binary the cluster's instances run; Lab is
	// the lab's, which runs its NATS nodes.
	Binary, Lab string
	// Dir is the cluster's directory; it should be empty.
	Dir string
	// Short is the version in make test: shorter pauses between the kills.
	Short bool
	// Progress gets a line per step; nil discards them.
	Progress io.Writer
}

// Kill is one part killed during the run.
type Kill struct {
	Part string `json:"part"`
	// What is the part: "PostgreSQL primary", "NATS node", "instance".
	What string    `json:"what"`
	At   time.Time `json:"at"`
	// Recovery says how it came back: the promotion, or the restart.
	Recovery string `json:"recovery"`
	// FirstSuccess is the time from the kill to the first SUCCEEDED answer
	// to a checkout that began after it.
	FirstSuccess time.Duration `json:"first_success_ns"`
}

// The cluster's configuration during the run: a lease of 10 s instead of
// 30 s, so that a checkout whose instance was killed is taken over by a
// retry sooner.
var clusterEnv = map[string]string{"PROCESSING_LEASE": "10s", "LOG_FORMAT": "json"}

// run is one chaos run in progress.
type run struct {
	opts     Options
	c        *cluster.Cluster
	client   *client
	report   *Report
	mu       sync.Mutex
	keys     []*checkout
	refunds  []*refund
	captures []*capture
	stop     atomic.Bool
	workers  sync.WaitGroup
}

// Run starts a cluster under opts.Dir, runs the chaos against it, stops it,
// and returns what it found. An error is a run that could not be made; a
// broken guarantee is in the report's Problems.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	r := &run{opts: opts, report: &Report{Short: opts.Short, Started: time.Now().UTC()}}
	r.logf("starting the cluster under %s", opts.Dir)
	c, err := cluster.Up(ctx, cluster.Options{Dir: opts.Dir, Binary: opts.Binary, Lab: opts.Lab, Env: clusterEnv})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Down(context.WithoutCancel(ctx)) }()
	r.c = c
	urls := make([]string, len(c.Instances))
	for i, p := range c.Instances {
		urls[i] = p.URL
	}
	r.client = newClient(urls)
	r.logf("cluster up: %d instances, NATS %s, database %s", len(urls), c.NATSURL, c.Formation.URL)

	// The load runs until the kills are done; each checkout then goes on
	// until it is final, for at most drain.
	const drain = 2 * time.Minute
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	r.startLoad(loadCtx)
	err = r.kills(ctx)
	r.stop.Store(true)
	waited := make(chan struct{})
	go func() { r.workers.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(drain):
		cancelLoad()
		<-waited
	}
	if err != nil {
		return nil, err
	}
	r.report.Duration = time.Since(r.report.Started)
	r.logf("load stopped; checking %d keys, %d refund keys and %d capture and void keys", len(r.keys), len(r.refunds), len(r.captures))
	checking := time.Now()
	if err := r.check(ctx); err != nil {
		return nil, err
	}
	r.logf("checked in %s: %d problems", round(time.Since(checking)), len(r.report.Problems))
	return r.report, nil
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.opts.Progress, "%s chaos: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// pause is how long the load runs before the first kill, between kills,
// and after the last.
func (r *run) pause() time.Duration {
	if r.opts.Short {
		return 3 * time.Second
	}
	return 10 * time.Second
}

// startLoad starts the clients: fresh checkouts (one in ten declined, one
// in manualEvery only authorizing), a same-key storm every half second,
// replays of finished keys, refunds of succeeded charges, and captures and
// voids of succeeded authorizations.
func (r *run) startLoad(ctx context.Context) {
	fresh := 6
	if r.opts.Short {
		fresh = 4
	}
	for range fresh {
		r.workers.Go(func() {
			for !r.stop.Load() && ctx.Err() == nil {
				co := r.newCheckout(rand.IntN(manualEvery) == 0)
				r.client.settle(ctx, &co.record, "", co.charge)
			}
		})
	}
	r.workers.Go(func() {
		const clients = 12
		for !r.stop.Load() && ctx.Err() == nil {
			co := r.newCheckout(false)
			r.count(&r.report.Storms)
			var storm sync.WaitGroup
			for range clients {
				storm.Go(func() { r.client.settle(ctx, &co.record, "", co.charge) })
			}
			storm.Wait()
			time.Sleep(500 * time.Millisecond)
		}
	})
	r.workers.Go(func() {
		for !r.stop.Load() && ctx.Err() == nil {
			if co := r.pick(finished); co != nil {
				r.client.settle(ctx, &co.record, "", co.charge)
				r.count(&r.report.Replays)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	for range refundWorkers {
		r.workers.Go(func() { r.refundLoad(ctx) })
	}
	for range captureWorkers {
		r.workers.Go(func() { r.captureLoad(ctx) })
	}
}

// newCheckout is a new checkout key, one in ten with a declined card; a
// manual one only authorizes, with a card whose captures all succeed, or
// lose their answer (one in five), or are declined (one in ten).
func (r *run) newCheckout(manual bool) *checkout {
	return r.add(makeCheckout(manual))
}

// makeCheckout is newCheckout's checkout before the run knows it, for a
// caller that changes it first.
func makeCheckout(manual bool) *checkout {
	co := &checkout{key: uuid.NewString(), manual: manual,
		input: apiclient.ChargeCardInput{Amount: new(100 + rand.IntN(99_900)), Currency: new("USD"), PaymentMethod: "pm_card_visa"}}
	if manual {
		co.input.CaptureMethod = new(apiclient.CaptureMethodManual)
		switch rand.IntN(10) {
		case 0, 1:
			co.input.PaymentMethod = "pm_card_captureLostResponse"
		case 2:
			co.input.PaymentMethod = "pm_card_captureDeclined"
		}
	}
	if rand.IntN(10) == 0 {
		co.declined = true
		co.input.PaymentMethod = "pm_card_chargeDeclined"
	}
	return co
}

// add makes co one of the run's keys, first sent now.
func (r *run) add(co *checkout) *checkout {
	return enlist(r, &r.keys, co, &co.record)
}

// enlist adds key, whose record is rec, to one of the run's lists of keys
// (under run.mu), first sent now, and returns it.
func enlist[K any](r *run, list *[]K, key K, rec *record) K {
	rec.first = time.Now()
	r.mu.Lock()
	*list = append(*list, key)
	r.mu.Unlock()
	return key
}

// pick is a random checkout that choose says yes to, or nil when none of
// ten draws is. choose runs under r.mu, so that it may take the checkout.
func (r *run) pick(choose func(*checkout) bool) *checkout {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range 10 {
		if len(r.keys) == 0 {
			return nil
		}
		if co := r.keys[rand.IntN(len(r.keys))]; choose(co) {
			return co
		}
	}
	return nil
}

// finished says yes to a checkout that has had a final answer.
func finished(co *checkout) bool {
	_, ok := co.told()
	return ok
}

// kills kills the primary, a NATS node and an instance in turn, with the
// load running, and brings each back.
func (r *run) kills(ctx context.Context) error {
	pause := r.pause()
	time.Sleep(pause)

	f := r.c.Formation
	old, err := f.KillPrimary(ctx)
	if err != nil {
		return err
	}
	k := r.killed(old.Name, "PostgreSQL primary")
	promoted, err := f.WaitPrimary(ctx, old, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("no standby was promoted: %w", err)
	}
	r.report.Failover = time.Since(k.At)
	k.Recovery = fmt.Sprintf("%s promoted by pg_auto_failover after %s", promoted.Name, round(r.report.Failover))
	r.logf("%s", k.Recovery)
	r.waitSuccess(ctx, k)
	time.Sleep(pause)
	// The lost machine comes back: its node rejoins as the standby, so that
	// commits are synchronous again before the next kill.
	back := time.Now()
	if err := f.Restart(ctx, old, 2*time.Minute); err != nil {
		return err
	}
	k.Recovery += fmt.Sprintf("; %s rejoined as the standby %s after its restart", old.Name, round(time.Since(back)))
	r.logf("%s rejoined as the standby", old.Name)

	node := r.c.NATS[1]
	if err := node.Kill(); err != nil {
		return err
	}
	k = r.killed(node.Name, "NATS node")
	time.Sleep(pause)
	if err := node.Start(ctx, time.Minute); err != nil {
		return err
	}
	k.Recovery = fmt.Sprintf("restarted after %s; it catches up from the other two", round(time.Since(k.At)))
	r.waitSuccess(ctx, k)

	inst := r.c.Instances[len(r.c.Instances)-1]
	r.holdLeases(ctx, inst.URL)
	if err := inst.Kill(); err != nil {
		return err
	}
	k = r.killed(inst.Name, "chargeonce instance")
	r.waitSuccess(ctx, k)
	time.Sleep(pause)
	if err := inst.Start(ctx, 2*time.Minute); err != nil {
		return err
	}
	k.Recovery = fmt.Sprintf("restarted after %s; the others served meanwhile, and took over the checkouts it held once their leases ended", round(time.Since(k.At)))
	time.Sleep(pause)
	return nil
}

// heldCheckouts is how many checkouts the killed instance holds the lease
// of when it dies.
const heldCheckouts = 4

// heldCaptures is how many captures the killed instance holds the lease
// of when it dies.
const heldCaptures = 2

// holdLeases sends checkouts with the simulator's slow card, and captures
// of authorizations with its slow-capture card, to the instance at url,
// and returns once their provider calls are under way: killed now, it dies
// holding their leases. Their clients' retries on the other instances
// answer PROCESSING until the leases end (PROCESSING_LEASE), then one takes
// each attempt over and asks the provider by its key.
func (r *run) holdLeases(ctx context.Context, url string) {
	for range heldCaptures {
		// The authorization is made first, through any instance; the
		// capture load never takes it.
		co := makeCheckout(true)
		co.declined, co.taken = false, true
		co.input.PaymentMethod = "pm_card_captureSlow"
		r.client.settle(ctx, &r.add(co).record, "", co.charge)
		if told, _ := co.told(); told.status == apiclient.Succeeded {
			cp := r.newCapture(co, 0, true)
			cp.held = true
			r.workers.Go(func() { r.client.settle(ctx, &cp.record, url, cp.send) })
		}
	}
	for range heldCheckouts {
		co := makeCheckout(false)
		co.held, co.declined = true, false
		co.input.PaymentMethod = "pm_card_slow"
		r.add(co)
		r.workers.Go(func() { r.client.settle(ctx, &co.record, url, co.charge) })
	}
	// The simulator takes 3 s for the slow cards; the claims take far less.
	time.Sleep(time.Second)
}

// killed records a kill that has just happened.
func (r *run) killed(part, what string) *Kill {
	r.logf("killed %s (%s) with SIGKILL", part, what)
	k := &Kill{Part: part, What: what, At: time.Now()}
	r.mu.Lock()
	r.report.Kills = append(r.report.Kills, k)
	r.mu.Unlock()
	return k
}

// waitSuccess waits, for at most two minutes, for the first SUCCEEDED
// answer to a checkout that began after the kill.
func (r *run) waitSuccess(ctx context.Context, k *Kill) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if d := r.firstSuccess(k.At); d > 0 {
			k.FirstSuccess = d
			r.logf("first success after the kill of %s: %s", k.Part, round(d))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *run) firstSuccess(after time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first time.Duration
	for _, co := range r.keys {
		if !co.first.After(after) {
			continue
		}
		co.mu.Lock()
		if !co.final.IsZero() && len(co.answers) > 0 && co.answers[0].status == apiclient.Succeeded {
			if d := co.final.Sub(after); first == 0 || d < first {
				first = d
			}
		}
		co.mu.Unlock()
	}
	return first
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

// Package cluster runs chargeonce beyond one machine, on loopback: a
// pg_auto_failover formation (a monitor, a primary and a synchronous
// standby), a three-node NATS cluster whose CHARGES stream keeps three
// copies of each event, chargeonce instances on both, and the receipts
// consumer. Each part is its own process, so that any one can be killed as
// the loss of its machine would kill it (make cluster, make chaos). The
// instances and the consumer run the chargeonce binary; the NATS nodes run
// the lab's (lab cluster nats-node).
package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/db/localpg"
	"chargeonce/internal/apiclient"
	"chargeonce/lab/formation"
)

// Options configures Up.
type Options struct {
	// Dir holds everything: the formation, each NATS node's store, each
	// instance's data directory, and every part's log.
	Dir string
	// Binary is the chargeonce binary that the instances and the consumer run.
	Binary string
	// Lab is the lab's binary, which runs the NATS nodes (lab cluster
	// nats-node).
	Lab string
	// Instances and NATSNodes default to 3.
	Instances, NATSNodes int
	// Ports are the first of each kind of port; 0 picks free ones.
	Ports Ports
	// Env is set for every instance and the consumer, on top of what the
	// cluster sets (DATABASE_URL, NATS_URL, NATS_REPLICAS, PORT, …).
	Env map[string]string
	// Logger may be nil.
	Logger *slog.Logger
}

// Ports are the first ports of each kind: instance i listens on
// Instance+i-1, and so on.
type Ports struct {
	Instance, Metrics, NATS, NATSCluster int
}

// DefaultPorts are the lab cluster's ports: beside make run's 8080 and
// the embedded broker's 4223, so that both can run with it.
var DefaultPorts = Ports{Instance: 8081, Metrics: 9191, NATS: 4241, NATSCluster: 6241}

// Cluster is a running cluster.
type Cluster struct {
	Formation *formation.Formation
	NATS      []*Part
	Instances []*Part
	Receipts  *Part
	// NATSURL lists every NATS node, as NATS_URL.
	NATSURL string
	dir     string
	log     *slog.Logger
	// listenFree picks a free port (localpg.ListenFree; a test's, to
	// play another program that takes the port after the pick).
	listenFree func() (net.Listener, error)
}

// Up starts a cluster under opts.Dir, which should be empty: the formation,
// then the NATS nodes until JetStream answers, then the instances one by
// one (the first applies the migrations), then the receipts consumer. On an
// error it stops what it started.
func Up(ctx context.Context, opts Options) (c *Cluster, err error) {
	opts.Instances = cmp.Or(opts.Instances, 3)
	opts.NATSNodes = cmp.Or(opts.NATSNodes, 3)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Binary == "" || opts.Lab == "" {
		return nil, errors.New("cluster: the chargeonce binary and the lab's must both be given")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	c = &Cluster{dir: dir, log: log, listenFree: localpg.ListenFree}
	defer func() {
		if err != nil {
			_ = c.Down(context.WithoutCancel(ctx))
		}
	}()

	log.Info("cluster: starting the pg_auto_failover formation")
	c.Formation, err = formation.Start(ctx, formation.Options{Dir: filepath.Join(dir, "formation"), Fast: true, Logger: log})
	if err != nil {
		return c, err
	}

	// Picked after the formation, which takes seconds, so that no other
	// program has the time to take one of them before its node listens.
	nats, err := c.pick(0, opts.NATSNodes, opts.Ports.NATS, opts.Ports.NATSCluster)
	if err != nil {
		return c, err
	}
	natsPorts, routePorts := nats[0], nats[1]
	urls := make([]string, opts.NATSNodes)
	for i := range opts.NATSNodes {
		urls[i] = "nats://127.0.0.1:" + strconv.Itoa(natsPorts[i])
	}
	c.NATSURL = strings.Join(urls, ",")
	for i := range opts.NATSNodes {
		name := fmt.Sprintf("nats-%d", i+1)
		args := []string{"cluster", "nats-node", "-name", name, "-port", strconv.Itoa(natsPorts[i]),
			"-cluster-port", strconv.Itoa(routePorts[i]), "-store", filepath.Join(dir, name)}
		for j, p := range routePorts {
			if j != i {
				args = append(args, "-route", "nats://127.0.0.1:"+strconv.Itoa(p))
			}
		}
		p := c.part(name, urls[i], opts.Lab, args, nil)
		addr := strings.TrimPrefix(urls[i], "nats://")
		p.ready = func(ctx context.Context) error {
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err == nil {
				conn.Close()
			}
			return err
		}
		c.NATS = append(c.NATS, p)
		if err := p.Start(ctx, 30*time.Second); err != nil {
			return c, err
		}
	}
	if err := c.WaitJetStream(ctx, time.Minute); err != nil {
		return c, err
	}
	log.Info("cluster: NATS cluster up", "url", c.NATSURL)

	env := map[string]string{
		"DATABASE_URL":  c.Formation.URL,
		"NATS_URL":      c.NATSURL,
		"NATS_REPLICAS": strconv.Itoa(min(3, opts.NATSNodes)),
	}
	maps.Copy(env, opts.Env)
	with := func(more map[string]string) map[string]string {
		m := maps.Clone(env)
		maps.Copy(m, more)
		return m
	}
	for i := range opts.Instances {
		p, err := c.startInstance(ctx, i, opts.Ports, opts.Binary, with)
		if p != nil {
			c.Instances = append(c.Instances, p)
		}
		if err != nil {
			return c, err
		}
		log.Info("cluster: instance up", "name", p.Name, "url", p.URL)
	}
	c.Receipts = c.part("receipts", "", opts.Binary, []string{"consume", "receipts"},
		with(map[string]string{"DATA_DIR": filepath.Join(dir, "receipts")}))
	if err := c.Receipts.Start(ctx, 0); err != nil {
		return c, err
	}
	return c, nil
}

func (c *Cluster) part(name, url, binary string, args []string, env map[string]string) *Part {
	return &Part{Name: name, URL: url, Log: filepath.Join(c.dir, "logs", name+".log"), binary: binary, args: args, env: env}
}

// Parts are the processes other than PostgreSQL's, instances first.
func (c *Cluster) Parts() []*Part {
	parts := append(append([]*Part{}, c.Instances...), c.NATS...)
	if c.Receipts != nil {
		parts = append(parts, c.Receipts)
	}
	return parts
}

// Down stops the instances and the consumer, then the NATS nodes, then the
// formation.
func (c *Cluster) Down(ctx context.Context) error {
	var errs []error
	for _, p := range c.Parts() {
		errs = append(errs, p.Stop(30*time.Second))
	}
	if c.Formation != nil {
		errs = append(errs, c.Formation.Stop(ctx))
	}
	return errors.Join(errs...)
}

// Connect connects to the NATS cluster (any node; reconnecting while nodes
// are away). Closing the connection is the caller's.
func (c *Cluster) Connect() (*nats.Conn, jetstream.JetStream, error) {
	conn, err := nats.Connect(c.NATSURL, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(conn)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, js, nil
}

// WaitJetStream waits until JetStream answers through the NATS nodes: a
// majority of them has elected its meta leader.
func (c *Cluster) WaitJetStream(ctx context.Context, within time.Duration) error {
	conn, js, err := c.Connect()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		acancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("JetStream does not answer on %s: %w", c.NATSURL, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startInstance starts instance i (from 0) and waits until it serves.
// Free ports are picked just before it starts; when another program took
// one between the pick and the instance's listen, which the instance's log
// tells, it is started again on others, three times at most.
func (c *Cluster) startInstance(ctx context.Context, i int, ports Ports, binary string, env func(map[string]string) map[string]string) (*Part, error) {
	name := fmt.Sprintf("instance-%d", i+1)
	for try := 1; ; try++ {
		picked, err := c.pick(i, 1, ports.Instance, ports.Metrics)
		if err != nil {
			return nil, err
		}
		port, metrics := picked[0][0], picked[1][0]
		url := "http://127.0.0.1:" + strconv.Itoa(port)
		p := c.part(name, url, binary, []string{"serve"}, env(map[string]string{
			"PORT":         strconv.Itoa(port),
			"METRICS_ADDR": "127.0.0.1:" + strconv.Itoa(metrics),
			"DATA_DIR":     filepath.Join(c.dir, name),
		}))
		p.ready = apiclient.New(url, "", nil).Ready
		err = p.Start(ctx, 2*time.Minute)
		free := ports.Instance == 0 || ports.Metrics == 0
		if err == nil || try == 3 || !free || !strings.Contains(p.logSinceStart(), "address already in use") {
			return p, err
		}
		c.log.Info("cluster: another program took a port picked for the instance; picking others", "name", name, "try", try)
	}
}

// pick gives n parts, from part from on, a port of each kind whose first
// port is in firsts: consecutive from that first port, or free ones where
// it is 0, each held until all are picked so that no two parts get the
// same. Free ones are localpg.ListenFree's: below the ephemeral ports, so
// that no other program's or test's listen on port 0 takes one before the
// part listens on it.
func (c *Cluster) pick(from, n int, firsts ...int) (kinds [][]int, err error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	kinds = make([][]int, len(firsts))
	for k, first := range firsts {
		for i := range n {
			if first != 0 {
				kinds[k] = append(kinds[k], first+from+i)
				continue
			}
			l, err := c.listenFree()
			if err != nil {
				return nil, err
			}
			held = append(held, l)
			kinds[k] = append(kinds[k], l.Addr().(*net.TCPAddr).Port)
		}
	}
	return kinds, nil
}

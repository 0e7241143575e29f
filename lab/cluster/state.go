package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"chargeonce/lab/formation"
)

// State is what lab cluster up leaves in the cluster's directory
// for cluster down, and prints: every part, its process and how to kill it.
type State struct {
	// Supervisor is the process that runs the cluster; SIGTERM to it stops
	// everything.
	Supervisor int    `json:"supervisor_pid"`
	Dir        string `json:"dir"`
	// FormationDir is where the formation lives: under Dir, or under the
	// temp dir when PostgreSQL's user cannot reach Dir.
	FormationDir string      `json:"formation_dir"`
	DatabaseURL  string      `json:"database_url"`
	MonitorURL   string      `json:"monitor_url"`
	NATSURL      string      `json:"nats_url"`
	Parts        []PartState `json:"parts"`
}

// PartState is one process of the cluster.
type PartState struct {
	Name string `json:"name"`
	Role string `json:"role"`
	PID  int    `json:"pid"`
	URL  string `json:"url,omitempty"`
	Log  string `json:"log"`
	// Kill is the command that kills it as the loss of its machine would.
	Kill string `json:"kill"`
}

// StateFile is the state's file in a cluster's directory.
const StateFile = "cluster.json"

// State describes the cluster as it is now, run by supervisor. It fails
// when the formation has no primary within a minute.
func (c *Cluster) State(ctx context.Context, supervisor int) (State, error) {
	s := State{Supervisor: supervisor, Dir: c.dir, NATSURL: c.NATSURL}
	if f := c.Formation; f != nil {
		s.DatabaseURL, s.MonitorURL, s.FormationDir = f.URL, f.MonitorURL, f.Dir()
		primary, err := f.WaitPrimary(ctx, formation.Node{}, time.Minute)
		if err != nil {
			return s, fmt.Errorf("the formation's primary: %w", err)
		}
		pid := f.KeeperPID("monitor")
		s.Parts = append(s.Parts, PartState{Name: "monitor", Role: "pg_auto_failover monitor", PID: pid,
			URL: f.MonitorURL, Log: filepath.Join(f.Dir(), "monitor.log"), Kill: fmt.Sprintf("kill -9 -- -%d", pid)})
		for _, n := range f.Nodes {
			role := "PostgreSQL standby"
			if n.Port == primary.Port {
				role = "PostgreSQL primary"
			}
			pid := f.KeeperPID(n.Name)
			s.Parts = append(s.Parts, PartState{Name: n.Name, Role: role, PID: pid,
				URL: fmt.Sprintf("127.0.0.1:%d", n.Port), Log: filepath.Join(f.Dir(), n.Name+".log"),
				// The keeper's process group holds its PostgreSQL: both go.
				Kill: fmt.Sprintf("kill -9 -- -%d", pid)})
		}
	}
	for _, p := range c.NATS {
		s.Parts = append(s.Parts, p.state("NATS node (JetStream)"))
	}
	for _, p := range c.Instances {
		s.Parts = append(s.Parts, p.state("chargeonce instance"))
	}
	if c.Receipts != nil {
		s.Parts = append(s.Parts, c.Receipts.state("receipts consumer"))
	}
	return s, nil
}

func (p *Part) state(role string) PartState {
	pid := p.PID()
	return PartState{Name: p.Name, Role: role, PID: pid, URL: p.URL, Log: p.Log, Kill: fmt.Sprintf("kill -9 %d", pid)}
}

// Write saves the state in its directory.
func (s State) Write() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.Dir, StateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.Dir, StateFile))
}

// ReadState reads the state that cluster up left in dir.
func ReadState(dir string) (State, error) {
	var s State
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", filepath.Join(dir, StateFile), err)
	}
	return s, nil
}

// Print writes the summary a person needs: where to send checkouts, what
// runs where, and how to kill each part.
func (s State) Print(w io.Writer) {
	var instances []string
	for _, p := range s.Parts {
		if p.Role == "chargeonce instance" {
			instances = append(instances, p.URL)
		}
	}
	fmt.Fprintf(w, "chargeonce cluster is up (supervisor pid %d; data and logs under %s).\n\n", s.Supervisor, s.Dir)
	fmt.Fprintf(w, "Checkouts: %s (each serves the demo checkout at / and the playground at /playground; API key demo-key)\n", strings.Join(instances, "  "))
	fmt.Fprintf(w, "DATABASE_URL=%s\n", s.DatabaseURL)
	fmt.Fprintf(w, "NATS_URL=%s\n\n", s.NATSURL)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PART\tROLE\tPID\tADDRESS\tKILL IT WITH")
	for _, p := range s.Parts {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", p.Name, p.Role, p.PID, p.URL, p.Kill)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nKilling the primary's keeper group is the loss of its machine: pg_auto_failover promotes the standby in seconds,\n"+
		"and every instance reconnects to it by itself. A killed NATS node or instance stays down (the others carry on);\n"+
		"`make chaos` kills and restarts each kind in turn and checks that nothing was lost or charged twice.\n"+
		"Logs: %s/logs/, and the formation's keepers in %s/*.log. Stop everything with: make cluster-down\n", s.Dir, s.FormationDir)
}

package events

import (
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NodeConfig is one node of a NATS cluster on loopback, as chargeonce
// cluster runs three: each node its own process, so that one can be killed
// while the others keep the stream.
type NodeConfig struct {
	// Name is the node's server name, unique in the cluster.
	Name string
	// Port is the client port; ClusterPort the port the other nodes route to.
	Port, ClusterPort int
	// Routes are the other nodes' cluster URLs (nats://127.0.0.1:PORT).
	Routes []string
	// StoreDir is the node's JetStream file store; a restarted node finds
	// its copy of the stream there and catches up from the others.
	StoreDir string
}

// ClusterName names the NATS cluster that chargeonce cluster runs.
const ClusterName = "chargeonce"

// StartNode starts a clustered NATS server with JetStream on loopback. It
// answers clients once it listens; JetStream is usable once a majority of
// the nodes have found each other.
func StartNode(cfg NodeConfig) (*server.Server, error) {
	if err := os.MkdirAll(cfg.StoreDir, 0o700); err != nil {
		return nil, err
	}
	routes := make([]*url.URL, 0, len(cfg.Routes))
	for _, r := range cfg.Routes {
		u, err := url.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", r, err)
		}
		routes = append(routes, u)
	}
	s, err := server.NewServer(&server.Options{
		ServerName: cfg.Name,
		Host:       "127.0.0.1",
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		Cluster: server.ClusterOpts{
			Name: ClusterName,
			Host: "127.0.0.1",
			Port: cfg.ClusterPort,
		},
		Routes: routes,
		NoSigs: true, // signals are the chargeonce process's
	})
	if err != nil {
		return nil, fmt.Errorf("NATS node %s: %w", cfg.Name, err)
	}
	s.ConfigureLogger()
	s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("NATS node %s did not start on 127.0.0.1:%d", cfg.Name, cfg.Port)
	}
	return s, nil
}

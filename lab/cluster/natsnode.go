package cluster

import (
	"fmt"
	"net/url"

	"github.com/nats-io/nats-server/v2/server"

	"chargeonce/events"
)

// NodeConfig is one node of a NATS cluster on loopback, as the cluster
// runs three: each node its own process, so that one can be killed
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

// ClusterName names the lab cluster's NATS cluster.
const ClusterName = "chargeonce"

// StartNode starts a clustered NATS server with JetStream on loopback. It
// answers clients once it listens; JetStream is usable once a majority of
// the nodes have found each other.
func StartNode(cfg NodeConfig) (*server.Server, error) {
	routes := make([]*url.URL, 0, len(cfg.Routes))
	for _, r := range cfg.Routes {
		u, err := url.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", r, err)
		}
		routes = append(routes, u)
	}
	return events.StartServer(&server.Options{
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
	}, "NATS node "+cfg.Name, "")
}

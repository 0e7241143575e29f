package localpg

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
)

// StartStandby returns a streaming standby of primary running in opts.Dir:
// a read-only copy that replays primary's WAL as it comes, made with
// pg_basebackup -R (which writes the standby's primary_conninfo) unless
// opts.Dir already holds a cluster, and started like Start's servers. It
// streams asynchronously until primary names it in
// synchronous_standby_names. For tests of replication and of connections
// that must reach the primary.
func StartStandby(ctx context.Context, primary *Server, opts Options) (*Server, error) {
	inst, log, unlock, err := lockInstance(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if port, ok := inst.running(ctx); ok {
		return inst.server(port, false, opts.start()), nil
	}
	if _, err := os.Stat(filepath.Join(inst.dir, "PG_VERSION")); err != nil {
		if err := inst.baseBackup(ctx, primary, log); err != nil {
			return nil, err
		}
	}
	if err := inst.removeStalePID(); err != nil {
		return nil, err
	}
	port, err := inst.start(ctx, opts.start(), 0)
	if err != nil {
		return nil, err
	}
	log.Info("started local PostgreSQL standby", "dir", inst.dir, "port", port, "primary_port", primary.port)
	return inst.server(port, true, opts.start()), nil
}

// baseBackup copies primary into the instance's directory, as ensureCluster
// runs initdb: into a scratch directory renamed into place.
func (in *instance) baseBackup(ctx context.Context, primary *Server, log *slog.Logger) error {
	log.Info("local PostgreSQL: copying the primary for a standby", "dir", in.dir, "primary_port", primary.port)
	return in.intoPlace(".basebackup", func(scratch string) error {
		out, err := in.run(ctx, "pg_basebackup", "-D", scratch, "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port),
			"-U", localUser, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
		if err != nil {
			return fmt.Errorf("local PostgreSQL: pg_basebackup: %w\n%s", err, Tail(out, 40))
		}
		return nil
	})
}

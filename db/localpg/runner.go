package localpg

import (
	"log/slog"
	"os"
	"syscall"
)

// Runner runs PostgreSQL's programs for a data directory, as Start does:
// from the server binaries on the machine, and when this process is root,
// as an unprivileged user with a data directory that user can reach. Tools
// that run PostgreSQL in other ways than Start (a pg_auto_failover
// formation) use one, so that they run it as the local server does.
type Runner struct{ in *instance }

// NewRunner finds the binaries and, as root, the user to run them as, for
// the data directory dir.
func NewRunner(dir string, log *slog.Logger) (*Runner, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	in, err := resolve(dir, log)
	if err != nil {
		return nil, err
	}
	return &Runner{in: in}, nil
}

// Dir is the data directory to use: the one given, or one under the temp
// dir when the server's user cannot reach it.
func (r *Runner) Dir() string { return r.in.dir }

// BinDir is the directory that holds initdb, pg_ctl and postgres.
func (r *Runner) BinDir() string { return r.in.bins }

// Credential is the user the programs run as; nil when this process is
// not root and they run as it.
func (r *Runner) Credential() *syscall.Credential { return r.in.cred }

// Own gives path to the user the programs run as.
func (r *Runner) Own(path string) error { return r.in.own(path) }

// Superuser is the superuser of a cluster that the programs create: the
// operating system user that runs them, postgres when this process is root.
func (r *Runner) Superuser() string {
	if r.in.cred == nil {
		if u := os.Getenv("USER"); u != "" {
			return u
		}
	}
	return "postgres"
}

// Postmaster is the process id of the postmaster that runs, or last ran,
// in the data directory dir, read from its postmaster.pid; running says
// whether that process is alive and is PostgreSQL serving dir.
func Postmaster(dir string) (pid int, running bool, err error) {
	pf, err := (&instance{dir: dir}).readPIDFile()
	if err != nil {
		return 0, false, err
	}
	return pf.pid, alive(pf.pid) && isPostgres(pf.pid, dir), nil
}

package localpg

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
)

// ensureCluster creates the data directory and runs initdb if it holds no
// cluster yet. initdb runs into a scratch directory that is renamed into
// place, so an interrupted initdb never leaves a half-made cluster at dir.
func (in *instance) ensureCluster(ctx context.Context, log *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(in.dir, "PG_VERSION")); err == nil {
		return in.own(in.dir)
	}
	if entries, err := os.ReadDir(in.dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("local PostgreSQL: %s is neither empty nor a PostgreSQL data directory", in.dir)
	}
	if in.cred != nil && !canTraverse(in.cred, filepath.Dir(in.dir)) {
		// resolve's check passed, so a directory created since (umask) is in
		// the way; this only happens on unusual umasks.
		return fmt.Errorf("local PostgreSQL: user %d cannot reach %s; check the permissions of its parents",
			in.cred.Uid, in.dir)
	}

	log.Info("local PostgreSQL: creating cluster", "dir", in.dir)
	return in.intoPlace(".initdb", func(scratch string) error {
		out, err := in.run(ctx, "initdb", "-D", scratch, "-A", "trust", "-U", localUser, "-E", "UTF8", "--no-locale", "--no-sync")
		if err != nil {
			return fmt.Errorf("local PostgreSQL: initdb: %w\n%s", err, Tail(out, 40))
		}
		return nil
	})
}

// intoPlace makes a cluster with fill in a scratch directory beside the
// instance's (its name plus suffix), owned by the server's user, and renames
// it into place, so that an interrupted fill never leaves a half-made
// cluster where a server would start from it. fill writes without fsync:
// the directory is synced once it is in place, and a crash before that
// only costs a re-run.
func (in *instance) intoPlace(suffix string, fill func(scratch string) error) error {
	scratch := in.dir + suffix
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("local PostgreSQL: %w", err)
	}
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return fmt.Errorf("local PostgreSQL: %w", err)
	}
	if err := in.own(scratch); err != nil {
		return err
	}
	if err := fill(scratch); err != nil {
		os.RemoveAll(scratch)
		return err
	}
	// rename(2) replaces an empty directory, so a Dir made by hand is fine.
	if err := os.Rename(scratch, in.dir); err != nil {
		os.RemoveAll(scratch)
		return fmt.Errorf("local PostgreSQL: %w", err)
	}
	syncDir(in.dir)
	return nil
}

// own gives the data directory to the server's user, with the mode postgres
// insists on.
func (in *instance) own(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("local PostgreSQL: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("local PostgreSQL: %s is not a directory", dir)
	}
	if in.cred != nil {
		if err := os.Lchown(dir, int(in.cred.Uid), int(in.cred.Gid)); err != nil {
			return fmt.Errorf("local PostgreSQL: %w", err)
		}
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("local PostgreSQL: %w", err)
		}
	}
	return nil
}

func syncDir(dir string) {
	f, err := os.Open(dir)
	if err == nil {
		f.Sync()
		f.Close()
	}
}

// CreateDatabase creates the database name, anew if one of that name is
// there, on the server that serverURL (a URL of any of its databases, for
// a user who may create databases) reaches, and returns the new
// database's URL: serverURL with its database replaced.
func CreateDatabase(ctx context.Context, serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// ensureDatabase creates the chargeonce database if it is missing.
func (in *instance) ensureDatabase(ctx context.Context, adminURL string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("local PostgreSQL: connect: %w%s", err, in.logTail())
	}
	defer conn.Close(context.Background())
	var exists bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", Database).Scan(&exists)
	if err == nil && !exists {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{Database}.Sanitize())
	}
	if err != nil {
		return fmt.Errorf("local PostgreSQL: create database %s: %w", Database, err)
	}
	return nil
}

package formation_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"chargeonce/lab/formation"
	"chargeonce/lab/formation/formationtest"
)

// A formation of a monitor and two nodes fails over when its primary's
// postmaster is killed, and its URL then reaches the new primary.
func TestFormation_PrimaryKilled_StandbyIsPromoted(t *testing.T) {
	t.Parallel()
	dir := formationtest.Dir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	started := time.Now()
	f, err := formation.Start(ctx, formation.Options{Dir: filepath.Join(dir, "formation"), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	t.Logf("formation up in %s: %s", time.Since(started).Round(time.Millisecond), f.URL)
	port := func() int {
		t.Helper()
		conn, err := pgx.Connect(ctx, f.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var p int
		if err := conn.QueryRow(ctx, "SELECT inet_server_port()").Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first, err := f.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := port(); got != first.Port {
		t.Fatalf("the URL reached port %d, the primary is %d", got, first.Port)
	}
	killed := time.Now()
	old, err := f.KillPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now, err := f.WaitPrimary(ctx, old, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s promoted %s after the kill", now.Name, time.Since(killed).Round(time.Millisecond))
	if got := port(); got != now.Port {
		t.Fatalf("after the failover the URL reached port %d, the primary is %d", got, now.Port)
	}
}

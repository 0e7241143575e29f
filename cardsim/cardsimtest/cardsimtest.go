// Package cardsimtest serves the card simulator to tests outside it, which
// reach it as chargeonce does, over its HTTP API and never through its
// tables. Schema is the db/dbtest option that applies the simulator's
// migrations in the template database, after chargeonce's (db/dbtest knows
// only chargeonce's schema, and a development server needs no option: it
// creates the simulator's schema itself when it starts). Start serves the
// simulator on such a database under /provider, as a development server
// mounts it, and reads its charges, refunds, captures and voids with the
// typed client.
package cardsimtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/cardsim"
	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

// Schema adds the simulator's migrations (cardsim.Migrate) to a new
// database: dbtest.NewPool(t, cardsimtest.Schema).
var Schema = dbtest.WithMigrations("cardsim", cardsim.MigrationsFS, cardsim.Migrate)

// Options tune a started simulator: they are the simulator's own Config,
// whose zero value has no slow delay and the default refund settle time.
type Options = cardsim.Config

// Simulator is a card simulator served on a loopback HTTP server for the
// length of a test.
type Simulator struct {
	// URL is the simulator's API, as chargeonce's PROVIDER_URL names it and
	// a provider client is given: http://127.0.0.1:port/provider.
	URL string
	// API reads the simulator's charges and refunds over its HTTP API, as
	// from a development server (its ProviderCharges, ListProviderCharges,
	// ...); it has no GraphQL API behind it.
	API *apiclient.Client
}

// Start serves the simulator on pool, whose database must have its schema
// (dbtest.NewPool(t, Schema)), until the test ends.
func Start(t testing.TB, pool *pgxpool.Pool, opts Options) *Simulator {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/provider/", http.StripPrefix("/provider", cardsim.NewHandler(pool, opts)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &Simulator{URL: srv.URL + "/provider", API: apiclient.New(srv.URL, "", srv.Client())}
}

// Charges lists the simulator's charges that f selects (the zero filter:
// all of them), newest first. It fails the test if the simulator does not
// answer, so call it from the test's goroutine.
func (s *Simulator) Charges(t testing.TB, f apiclient.ProviderChargeFilter) []apiclient.ProviderCharge {
	t.Helper()
	charges, err := s.API.ListProviderCharges(context.Background(), f)
	if err != nil {
		t.Fatalf("cardsimtest: list charges: %v", err)
	}
	return charges
}

// Charge is the simulator's charge id as it is now; as Charges otherwise.
func (s *Simulator) Charge(t testing.TB, id string) apiclient.ProviderCharge {
	t.Helper()
	charge, err := s.API.ProviderChargeByID(context.Background(), id)
	if err != nil {
		t.Fatalf("cardsimtest: get charge %s: %v", id, err)
	}
	return *charge
}

// Refunds lists the simulator's refunds that f selects (the zero filter:
// all of them), newest first; as Charges otherwise.
func (s *Simulator) Refunds(t testing.TB, f apiclient.ProviderRefundFilter) []apiclient.ProviderRefund {
	t.Helper()
	refunds, err := s.API.ListProviderRefunds(context.Background(), f)
	if err != nil {
		t.Fatalf("cardsimtest: list refunds: %v", err)
	}
	return refunds
}

// Captures lists the simulator's captures that f selects (the zero
// filter: all of them), newest first; as Charges otherwise.
func (s *Simulator) Captures(t testing.TB, f apiclient.ProviderCaptureFilter) []apiclient.ProviderCapture {
	t.Helper()
	captures, err := s.API.ListProviderCaptures(context.Background(), f)
	if err != nil {
		t.Fatalf("cardsimtest: list captures: %v", err)
	}
	return captures
}

// Voids lists the simulator's voids that f selects; as Captures.
func (s *Simulator) Voids(t testing.TB, f apiclient.ProviderVoidFilter) []apiclient.ProviderVoid {
	t.Helper()
	voids, err := s.API.ListProviderVoids(context.Background(), f)
	if err != nil {
		t.Fatalf("cardsimtest: list voids: %v", err)
	}
	return voids
}

// ExpireAuthorization makes the open authorization of charge id lapse now,
// as if its window had passed (the simulator's control for tests); as
// Charges otherwise.
func (s *Simulator) ExpireAuthorization(t testing.TB, id string) {
	t.Helper()
	if err := s.API.ExpireProviderAuthorization(context.Background(), id); err != nil {
		t.Fatalf("cardsimtest: expire authorization %s: %v", id, err)
	}
}

// Installed reports whether the database of pool holds anything of the
// simulator's: its schema, or the table of its migrations. It is for the
// test that a production server leaves none.
func Installed(t testing.TB, pool *pgxpool.Pool) bool {
	t.Helper()
	var found bool
	err := pool.QueryRow(context.Background(), `SELECT
		EXISTS (SELECT 1 FROM information_schema.schemata WHERE schema_name = 'cardsim')
		OR to_regclass($1) IS NOT NULL`, cardsim.MigrationsTable).Scan(&found)
	if err != nil {
		t.Fatalf("cardsimtest: look for the simulator's schema: %v", err)
	}
	return found
}

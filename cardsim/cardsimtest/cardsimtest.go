// Package cardsimtest gives tests databases on which the card simulator can
// be served at once: Schema is the db/dbtest option that applies the
// simulator's migrations in the template database, after chargeonce's, for
// tests that mount the simulator themselves (cardsim.NewHandler). db/dbtest
// knows only chargeonce's schema, and a development server needs no option:
// it creates the simulator's schema itself when it starts.
package cardsimtest

import (
	"chargeonce/cardsim"
	"chargeonce/db/dbtest"
)

// Schema adds the simulator's migrations (cardsim.Migrate) to a new
// database: dbtest.NewPool(t, cardsimtest.Schema).
var Schema = dbtest.WithMigrations("cardsim", cardsim.MigrationsFS, cardsim.Migrate)

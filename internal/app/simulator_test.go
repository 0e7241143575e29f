package app_test

import (
	"context"
	"log/slog"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
	"chargeonce/events/eventstest"
	"chargeonce/internal/app"
	"chargeonce/merchant"
	"chargeonce/provider/stripe/stripefake"
)

// TestProductionServer_FreshDatabase_HasNoCardsimSchema: the simulator's
// schema exists only where the simulator is mounted. A development server
// creates it in its database; a production server never does, nor do the
// operator commands, and it charges through its provider all the same.
func TestProductionServer_FreshDatabase_HasNoCardsimSchema(t *testing.T) {
	t.Parallel()
	// Both databases are empty: each server's own migrations make them.
	devURL := dbtest.NewDatabase(t, dbtest.Empty)
	apitest.StartOn(t, devURL, nil)
	require.True(t, cardsimtest.Installed(t, dbtest.Open(t, devURL)), "a development server creates the simulator's schema")

	prodURL := dbtest.NewDatabase(t, dbtest.Empty)
	stripe := stripefake.Start(t)
	prodEnv := stripe.Env()
	maps.Copy(prodEnv, map[string]string{"APP_ENV": "production", "DATABASE_URL": prodURL, "NATS_URL": eventstest.Shared(t).URL()})
	// What `chargeonce apikey create` does: open the database as every
	// operator command does, and create a key.
	cfg, err := app.LoadConfig(func(k string) string { return prodEnv[k] })
	require.NoError(t, err)
	pool, closeDB, err := app.OpenDatabase(context.Background(), cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	_, apiKey, err := merchant.New(pool, false).CreateAPIKey(context.Background(), "shop", merchant.KeySecret)
	closeDB()
	require.NoError(t, err)
	prodPool := dbtest.Open(t, prodURL)
	require.False(t, cardsimtest.Installed(t, prodPool), "an operator command leaves no cardsim schema")

	prod := apitest.StartOn(t, prodURL, prodEnv)
	key := apitest.NewKey()
	r := prod.ChargeCard(t, apiKey, key, apitest.Visa(100))
	require.Empty(t, r.Errors)
	require.Equal(t, "SUCCEEDED", r.Data.ChargeCard.Status)
	require.Len(t, stripe.ClientIntents(key), 1, "the charge went to the provider")
	require.False(t, cardsimtest.Installed(t, prodPool), "a production server leaves no cardsim schema")
}

package merchant

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/payment"
)

// TestOrigins_Production_HTTPSOnly: production registers no plain-http
// origin, and honours none registered before (by a development command on
// the same database, or before production refused them), while it can
// still remove one; development keeps http, loopback included.
func TestOrigins_Production_HTTPSOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	dev := New(pool, true)
	prod := NewWithConfig(pool, false, Config{Production: true})
	m, _, err := dev.CreateAPIKey(ctx, "shop", KeyPublishable)
	require.NoError(t, err)

	const plain, secure = "http://127.0.0.1:5173", "https://shop.example"
	for _, origin := range []string{"http://127.0.0.1:5174", "http://shop.example", "HTTP://Shop.Example:80"} {
		_, _, err := prod.AddOrigin(ctx, "shop", origin)
		requireCode(t, err, payment.EINVALID, "must be https:// when APP_ENV=production")
	}
	_, added, err := prod.AddOrigin(ctx, "shop", secure)
	require.NoError(t, err)
	require.True(t, added)
	_, added, err = dev.AddOrigin(ctx, "shop", plain)
	require.NoError(t, err, "development registers plain http")
	require.True(t, added)

	for _, svc := range []*Service{dev, prod} {
		ok, err := svc.OriginAllowed(ctx, m.ID, secure)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = svc.AnyOriginAllowed(ctx, secure)
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, err := dev.OriginAllowed(ctx, m.ID, plain)
	require.NoError(t, err)
	require.True(t, ok, "development serves it")
	ok, err = prod.OriginAllowed(ctx, m.ID, plain)
	require.NoError(t, err)
	require.False(t, ok, "production does not, though it is stored")
	ok, err = prod.AnyOriginAllowed(ctx, plain)
	require.NoError(t, err)
	require.False(t, ok)

	_, err = prod.RemoveOrigin(ctx, "shop", plain)
	require.NoError(t, err, "an operator can still clean it up")
	require.Equal(t, []string{secure}, dbtest.Query[string](t, pool, "SELECT origin FROM merchant_origins"))
}

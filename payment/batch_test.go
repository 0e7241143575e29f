package payment

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldPool is every connection of a pool, taken by a test.
type heldPool []*pgxpool.Conn

// holdPool takes every connection of pool, so that the writes made next
// wait for one together.
func holdPool(t *testing.T, pool *pgxpool.Pool) heldPool {
	t.Helper()
	var held heldPool
	for range pool.Config().MaxConns {
		conn, err := pool.Acquire(context.Background())
		require.NoError(t, err)
		held = append(held, conn)
	}
	return held
}

// releaseOne gives one connection back: the first waiting write takes it,
// and with it the others. releaseAll gives back the rest.
func (h *heldPool) releaseOne() {
	(*h)[0].Release()
	*h = (*h)[1:]
}

func (h *heldPool) releaseAll() {
	for _, c := range *h {
		c.Release()
	}
	*h = nil
}

// waiting waits until n writes of b wait for a connection.
func waiting[In, Out any](t *testing.T, b *batcher[In, Out], n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		b.mu.Lock()
		defer b.mu.Unlock()
		require.Len(c, b.waiting, n)
	}, 10*time.Second, 5*time.Millisecond)
}

func background(n int) []context.Context {
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		ctxs[i] = context.Background()
	}
	return ctxs
}

package payment

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// atOnce runs f(0) … f(n-1), each in a goroutine of its own, and returns
// what each gave, in order.
func atOnce[R any](n int, f func(i int) R) []R {
	out := make([]R, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i] = f(i) })
	}
	wg.Wait()
	return out
}

// writtenTogether runs write, whose n writes of b it makes wait for a
// connection together: every connection of pool is held until all n wait
// (and meanwhile, if given, has run), then one is given back, which the
// first of them takes, and with it the others. It returns what write gave.
func writtenTogether[In, Out, R any](t *testing.T, pool *pgxpool.Pool, b *batcher[In, Out], n int, write func() R, meanwhile ...func()) R {
	t.Helper()
	var held []*pgxpool.Conn
	for range pool.Config().MaxConns {
		conn, err := pool.Acquire(context.Background())
		require.NoError(t, err)
		held = append(held, conn)
	}
	done := make(chan R)
	go func() { done <- write() }()
	waiting(t, b, n)
	for _, f := range meanwhile {
		f()
	}
	held[0].Release()
	got := <-done
	for _, conn := range held[1:] {
		conn.Release()
	}
	return got
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

package payment

import (
	"context"
	"strconv"
	"testing"
)

// The cost of a first charge (claim, a call of the in-memory provider, finalize)
// against a replay (one failed claim and one read). Compare the two in one
// run: `make bench`.

func BenchmarkChargeCard_NewKey(b *testing.B) {
	bb := setup(b, Config{})
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, err := bb.svc.ChargeCard(ctx, bb.merchant, "bench-"+strconv.Itoa(i), visa(100)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChargeCard_Replay(b *testing.B) {
	bb := setup(b, Config{})
	ctx := context.Background()
	if _, err := bb.svc.ChargeCard(ctx, bb.merchant, "bench", visa(100)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := bb.svc.ChargeCard(ctx, bb.merchant, "bench", visa(100))
		if err != nil || !r.Replayed {
			b.Fatalf("want a replay, got %+v, %v", r, err)
		}
	}
}

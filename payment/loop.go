package payment

import (
	"context"
	"time"
)

// every calls fn at once, then every interval until ctx ends. A pass that
// runs long delays the next one rather than overlapping it. The reconciler
// runs on it.
func every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if ctx.Err() != nil {
			return
		}
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

package apitest

import (
	"chargeonce/internal/apiclient"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FinalStatus polls chargeStatus until the attempt leaves PROCESSING.
func (s *Server) FinalStatus(t *testing.T, key string, within time.Duration) *apiclient.ChargeResult {
	t.Helper()
	var p *apiclient.ChargeResult
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p = s.ChargeStatus(c, "demo-key", key).Data.ChargeStatus
		require.NotNil(c, p)
		require.NotEqual(c, "PROCESSING", p.Status)
	}, within, 50*time.Millisecond, "attempt %s still not final", key)
	return p
}

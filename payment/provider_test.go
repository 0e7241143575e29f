package payment

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"chargeonce/metrics"
)

// answeringProvider answers every call at once with a fixed answer, and
// with err.
type answeringProvider struct {
	err error
}

func (p answeringProvider) CreateCharge(context.Context, ProviderChargeRequest) (ProviderCharge, error) {
	return ProviderCharge{ID: "ch_1", Succeeded: true}, p.err
}

func (p answeringProvider) FindCharges(context.Context, ProviderChargeRequest) ([]ProviderCharge, error) {
	return nil, p.err
}

func (p answeringProvider) CancelCharge(context.Context, ProviderChargeRequest, string) (ProviderCharge, error) {
	return ProviderCharge{}, p.err
}

func (p answeringProvider) CreateRefund(context.Context, ProviderRefundRequest) (ProviderRefund, error) {
	return ProviderRefund{ID: "re_1", State: RefundPending}, p.err
}

func (p answeringProvider) FindRefund(context.Context, ProviderRefundRequest) (*ProviderRefund, error) {
	return nil, p.err
}

func (p answeringProvider) CaptureCharge(context.Context, ProviderCaptureRequest) (ProviderCapture, error) {
	return ProviderCapture{ID: "cp_1", FailureCode: FailureAuthorizationExpired}, p.err
}

func (p answeringProvider) FindCapture(context.Context, ProviderCaptureRequest) (*ProviderCapture, error) {
	return &ProviderCapture{ID: "cp_1", Succeeded: true}, p.err
}

func (p answeringProvider) VoidCharge(context.Context, ProviderVoidRequest) (ProviderVoid, error) {
	return ProviderVoid{ID: "vd_1", Succeeded: true}, p.err
}

func (p answeringProvider) FindVoid(context.Context, ProviderVoidRequest) (*ProviderVoid, error) {
	return nil, p.err
}

func (p answeringProvider) ReadAuthorization(context.Context, string) (ProviderAuthorization, error) {
	return ProviderAuthorization{State: AuthorizationExpired}, p.err
}

// TestInstrument_EveryProviderCall_IsTimedAndCounted calls every method of
// the provider through the one wrapper, once answering and once with an
// unknown outcome, and finds each call timed under its operation and
// result, and each unknown one counted as an error.
func TestInstrument_EveryProviderCall_IsTimedAndCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := func(p Provider) map[string]func() error {
		return map[string]func() error{
			"create_charge": func() error { _, err := p.CreateCharge(ctx, ProviderChargeRequest{}); return err },
			"find_charge":   func() error { _, err := p.FindCharges(ctx, ProviderChargeRequest{}); return err },
			"cancel_charge": func() error { _, err := p.CancelCharge(ctx, ProviderChargeRequest{}, "ch_1"); return err },
			"create_refund": func() error { _, err := p.CreateRefund(ctx, ProviderRefundRequest{}); return err },
			"find_refund":   func() error { _, err := p.FindRefund(ctx, ProviderRefundRequest{}); return err },
			"capture_charge": func() error {
				_, err := p.CaptureCharge(ctx, ProviderCaptureRequest{})
				return err
			},
			"find_capture":       func() error { _, err := p.FindCapture(ctx, ProviderCaptureRequest{}); return err },
			"void_charge":        func() error { _, err := p.VoidCharge(ctx, ProviderVoidRequest{}); return err },
			"find_void":          func() error { _, err := p.FindVoid(ctx, ProviderVoidRequest{}); return err },
			"read_authorization": func() error { _, err := p.ReadAuthorization(ctx, "ch_1"); return err },
		}
	}
	answered := map[string]string{
		"create_charge": "ok", "find_charge": "not_found", "cancel_charge": "ok", "create_refund": "pending",
		"find_refund": "not_found", "capture_charge": "declined", "find_capture": "ok", "void_charge": "ok",
		"find_void": "not_found", "read_authorization": "expired",
	}
	m := metrics.New(prometheus.NewRegistry())
	for op, call := range calls(instrument(answeringProvider{}, m)) {
		require.NoError(t, call(), op)
	}
	unknown := fmt.Errorf("%w: the connection dropped", ErrOutcomeUnknown)
	for op, call := range calls(instrument(answeringProvider{err: unknown}, m)) {
		require.True(t, errors.Is(call(), ErrOutcomeUnknown), "%s passes the provider's error on", op)
	}
	require.Len(t, answered, 10, "every method of Provider")
	for op, result := range answered {
		require.Equal(t, 1, testutil.CollectAndCount(m.ProviderDuration.WithLabelValues(op, result).(prometheus.Histogram)), op)
		require.InDelta(t, 1, testutil.ToFloat64(m.ProviderErrors.WithLabelValues(op)), 0, "%s: the unknown outcome counted", op)
	}
	require.Equal(t, 20, testutil.CollectAndCount(m.ProviderDuration), "one sample series per operation and result")
}

package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/internal/apiclient"
)

// TestCheckStored_FindsWhatWasLostOrDoubled feeds the checker what a broken
// cluster could leave behind, so that a chaos run that finds nothing means
// something.
func TestCheckStored_FindsWhatWasLostOrDoubled(t *testing.T) {
	t.Parallel()
	stored := func(status, id, providerID string) *apiclient.ChargeResult {
		p := &apiclient.ChargeResult{Status: status}
		if id != "" {
			p.Charge = &apiclient.Charge{Id: id, ProviderChargeId: providerID}
		}
		return p
	}
	ok := []apiclient.ProviderCharge{{ID: "ch_1", Status: "succeeded"}}
	for _, tc := range []struct {
		name          string
		told          answer
		now           *apiclient.ChargeResult
		charges       []apiclient.ProviderCharge
		lost, doubled int
		problems      int
	}{
		{"as told", answer{status: "SUCCEEDED", id: "c1"}, stored("SUCCEEDED", "c1", "ch_1"), ok, 0, 0, 0},
		{"a declined card, as told", answer{status: "FAILED"}, stored("FAILED", "", ""), []apiclient.ProviderCharge{{ID: "ch_2", Status: "failed"}}, 0, 0, 0},
		{"unknown after a failover", answer{status: "SUCCEEDED", id: "c1"}, nil, ok, 1, 0, 1},
		{"another charge now", answer{status: "SUCCEEDED", id: "c1"}, stored("SUCCEEDED", "c2", "ch_1"), ok, 1, 0, 1},
		{"failed now", answer{status: "SUCCEEDED", id: "c1"}, stored("FAILED", "", ""), ok, 1, 0, 1},
		{"charged twice", answer{status: "SUCCEEDED", id: "c1"}, stored("SUCCEEDED", "c1", "ch_1"),
			[]apiclient.ProviderCharge{{ID: "ch_1", Status: "succeeded"}, {ID: "ch_3", Status: "succeeded"}}, 0, 1, 2},
		{"succeeded, never charged", answer{status: "SUCCEEDED", id: "c1"}, stored("SUCCEEDED", "c1", "ch_1"), nil, 0, 0, 1},
		{"not the provider's charge", answer{status: "SUCCEEDED", id: "c1"}, stored("SUCCEEDED", "c1", "ch_9"), ok, 0, 0, 1},
		{"failed, and charged", answer{status: "FAILED"}, stored("FAILED", "", ""), ok, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &run{report: &Report{}}
			r.checkStored(&checkout{key: "k", record: record{answers: []answer{tc.told}}}, tc.now, tc.charges)
			require.Equal(t, tc.lost, r.report.Lost, "lost")
			require.Equal(t, tc.doubled, r.report.Doubled, "doubled")
			require.Len(t, r.report.Problems, tc.problems, "%v", r.report.Problems)
		})
	}
}

// refundFixture is a charge of 1000 raced by two refunds, of 600 and 700,
// as a sound cluster leaves it: the first succeeded, the second was
// refused, and the provider holds the first once.
type refundFixture struct {
	co      *checkout
	refunds []*refund
	seen    refundsSeen
}

func newRefundFixture() *refundFixture {
	co := &checkout{key: "k", input: apiclient.ChargeCardInput{Amount: new(1000)},
		record: record{answers: []answer{{status: apiclient.Succeeded, id: "c1"}}}}
	newRefund := func(key string, amount int, told answer) *refund {
		return &refund{key: key, of: co, input: apiclient.RefundInput{ChargeId: "c1", Amount: new(amount)},
			record: record{answers: []answer{told}}}
	}
	return &refundFixture{
		co: co,
		refunds: []*refund{
			newRefund("rA", 600, answer{status: apiclient.Succeeded, id: "r1"}),
			newRefund("rB", 700, answer{status: codeExceeds}),
		},
		seen: refundsSeen{
			stored: []*apiclient.RefundResult{storedRefund("r1", "re_1"), nil},
			charge: &apiclient.RefundedCharge{Id: "c1", Amount: 1000, ProviderChargeId: "ch_1", AmountRefunded: 600,
				Refunds: []apiclient.Refund{{Id: "r1", Amount: 600, Status: apiclient.Succeeded, ProviderRefundId: new("re_1")}}},
			provider: []apiclient.ProviderRefund{providerRefund("re_1", "rA", 600, "succeeded")},
		},
	}
}

func storedRefund(id, providerID string) *apiclient.RefundResult {
	return &apiclient.RefundResult{Status: apiclient.Succeeded, Refund: &apiclient.Refund{Id: id, ProviderRefundId: &providerID}}
}

// providerRefund is a provider's refund of ch_1 for the client's refund
// key, named for its attempt as chargeonce names it.
func providerRefund(id, key string, amount int64, status string) apiclient.ProviderRefund {
	return apiclient.ProviderRefund{ID: id, Charge: "ch_1", Amount: amount, Status: status, IdempotencyKey: "chargeonce_a-" + key,
		Metadata: map[string]string{"chargeonce_attempt_id": "a-" + key, "chargeonce_kind": "refund", "chargeonce_charge_id": "c1",
			"client_idempotency_key": key}}
}

// TestCheckRefunds_FindsWhatWasRefundedTwiceOrBeyond feeds the refund
// checker what a broken cluster could leave behind: a refund the provider
// made twice, more refunded than charged, a refused refund that was made or
// that fitted, a refund that was lost or that no client was told of.
func TestCheckRefunds_FindsWhatWasRefundedTwiceOrBeyond(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                string
		breaks              func(f *refundFixture)
		twice, beyond, lost int
		problems            int
		succeeded, refused  int
		providerRefunds     int
	}{
		{"as told", func(*refundFixture) {}, 0, 0, 0, 0, 1, 1, 1},
		{"a failed provider refund does not count", func(f *refundFixture) {
			f.seen.provider = append(f.seen.provider, providerRefund("re_2", "rA", 600, "failed"))
		}, 0, 0, 0, 0, 1, 1, 1},
		{"refunded twice at the provider", func(f *refundFixture) {
			f.seen.provider = append(f.seen.provider, providerRefund("re_2", "rA", 600, "succeeded"))
		}, 1, 1, 0, 2, 1, 1, 2},
		{"refused, and refunded at the provider", func(f *refundFixture) {
			f.seen.provider = append(f.seen.provider, providerRefund("re_3", "rB", 700, "pending"))
		}, 0, 1, 0, 2, 1, 1, 2},
		{"both refunds of the race succeeded", func(f *refundFixture) {
			f.refunds[1].answers = []answer{{status: apiclient.Succeeded, id: "r2"}}
			f.seen.stored[1] = storedRefund("r2", "re_3")
			f.seen.charge.AmountRefunded = 1300
			f.seen.charge.Refunds = append(f.seen.charge.Refunds, apiclient.Refund{Id: "r2", Amount: 700, Status: apiclient.Succeeded})
			f.seen.provider = append(f.seen.provider, providerRefund("re_3", "rB", 700, "succeeded"))
		}, 0, 1, 0, 1, 2, 0, 2},
		{"refused, and stored", func(f *refundFixture) {
			f.seen.stored[1] = &apiclient.RefundResult{Status: apiclient.Processing}
		}, 0, 0, 1, 1, 1, 1, 1},
		{"refused, though it fitted", func(f *refundFixture) {
			*f.refunds[0].input.Amount = 200
			f.seen.charge.AmountRefunded = 200
			f.seen.provider[0].Amount = 200
		}, 0, 0, 0, 1, 1, 1, 1},
		{"succeeded, and unknown now", func(f *refundFixture) { f.seen.stored[0] = nil }, 0, 0, 1, 1, 1, 1, 1},
		{"succeeded, and another refund now", func(f *refundFixture) { f.seen.stored[0] = storedRefund("r9", "re_1") }, 0, 0, 1, 1, 1, 1, 1},
		{"amountRefunded is not the refunds' sum", func(f *refundFixture) { f.seen.charge.AmountRefunded = 0 }, 0, 0, 0, 1, 1, 1, 1},
		{"a refund no client was told of", func(f *refundFixture) {
			f.seen.charge.Refunds = append(f.seen.charge.Refunds, apiclient.Refund{Id: "r9", Amount: 100, Status: apiclient.Succeeded})
		}, 0, 0, 0, 1, 1, 1, 1},
		{"succeeded, never refunded at the provider", func(f *refundFixture) { f.seen.provider = nil }, 0, 0, 0, 1, 1, 1, 0},
		{"another amount at the provider", func(f *refundFixture) { f.seen.provider[0].Amount = 500 }, 0, 0, 0, 1, 1, 1, 1},
		{"not the provider's refund", func(f *refundFixture) { f.seen.stored[0] = storedRefund("r1", "re_9") }, 0, 0, 0, 1, 1, 1, 1},
		{"a provider refund of a key no client sent", func(f *refundFixture) {
			f.seen.provider = append(f.seen.provider, providerRefund("re_4", "rX", 100, "succeeded"))
		}, 0, 0, 0, 1, 1, 1, 2},
		{"a provider refund named for no attempt", func(f *refundFixture) {
			delete(f.seen.provider[0].Metadata, "chargeonce_attempt_id")
		}, 0, 0, 0, 1, 1, 1, 1},
		{"a refund failed", func(f *refundFixture) {
			f.refunds[0].answers = []answer{{status: apiclient.Failed}}
			f.seen.stored[0] = &apiclient.RefundResult{Status: apiclient.Failed}
			f.seen.charge.AmountRefunded, f.seen.charge.Refunds, f.seen.provider = 0, nil, nil
		}, 0, 0, 0, 2, 0, 1, 0}, // failed, and the 700 refused would have fitted
		{"the charge is unknown now", func(f *refundFixture) { f.seen.charge = nil }, 0, 0, 0, 1, 1, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newRefundFixture()
			tc.breaks(f)
			r := &run{report: &Report{}}
			r.checkRefunds(f.co, f.refunds, f.seen)
			require.Equal(t, tc.twice, r.report.RefundedTwice, "refunded twice")
			require.Equal(t, tc.beyond, r.report.RefundedBeyond, "refunded beyond")
			require.Equal(t, tc.lost, r.report.RefundsLost, "refunds lost")
			require.Equal(t, tc.succeeded, r.report.RefundsSucceeded, "succeeded")
			require.Equal(t, tc.refused, r.report.RefundsRefused, "refused")
			require.Equal(t, tc.providerRefunds, r.report.ProviderRefunds, "provider refunds")
			require.Len(t, r.report.Problems, tc.problems, "%v", r.report.Problems)
		})
	}
}

// TestCheckAnswers_FindsAnswersThatChangedOrNeverCame checks what every
// key's clients were told, of a checkout or a refund.
func TestCheckAnswers_FindsAnswersThatChangedOrNeverCame(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name              string
		rec               *record
		final             bool
		changed, problems int
	}{
		{"the same answer twice", &record{first: now, final: now, answers: []answer{{status: "SUCCEEDED", id: "r1"}, {status: "SUCCEEDED", id: "r1", replayed: true}}}, true, 0, 0},
		{"another refund", &record{first: now, final: now, answers: []answer{{status: "SUCCEEDED", id: "r1"}, {status: "SUCCEEDED", id: "r2"}}}, true, 1, 1},
		{"refused, then succeeded", &record{first: now, final: now, answers: []answer{{status: codeExceeds}, {status: "SUCCEEDED", id: "r1"}}}, true, 1, 1},
		{"never final", &record{first: now, tries: 3}, false, 0, 1},
		{"an error not to retry", &record{first: now, final: now, answers: []answer{{status: "SUCCEEDED"}}, unknown: []string{"IDEMPOTENCY_KEY_REUSED"}}, true, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &run{report: &Report{}}
			require.Equal(t, tc.final, r.checkAnswers("refund key", "k", tc.rec))
			require.Equal(t, tc.changed, r.report.Changed, "changed")
			require.Len(t, r.report.Problems, tc.problems, "%v", r.report.Problems)
		})
	}
}

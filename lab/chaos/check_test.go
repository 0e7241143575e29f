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
	ok := []apiclient.ProviderCharge{{ID: "ch_1", Status: "succeeded", CaptureMethod: "automatic"}}
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
		{"charged, and only authorized at the provider", answer{status: "SUCCEEDED", id: "c1"}, stored("SUCCEEDED", "c1", "ch_1"),
			[]apiclient.ProviderCharge{{ID: "ch_1", Status: "succeeded", CaptureMethod: "manual"}}, 0, 0, 1},
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

// captureFixture is an authorization of 1000 as a sound cluster leaves it
// after a capture of 300 (not final), a final capture of 500 and a void
// that came after them and was refused; the provider holds the two
// captures, each once, under their attempts' keys.
type captureFixture struct {
	co   *checkout
	keys []*capture
	seen capturesSeen
}

func newCaptureFixture() *captureFixture {
	co := &checkout{key: "k", manual: true, input: apiclient.ChargeCardInput{Amount: new(1000)},
		record: record{answers: []answer{{status: apiclient.Succeeded, id: "c1"}}}}
	a := answer{status: apiclient.Succeeded, id: "cap1", amount: 300}
	b := answer{status: apiclient.Succeeded, id: "cap2", amount: 500}
	return &captureFixture{
		co: co,
		keys: []*capture{
			captureKey(co, "A", 300, false, a),
			captureKey(co, "B", 500, true, b),
			voidKey(co, "V", answer{status: codeCaptured}),
		},
		seen: capturesSeen{
			stored:   []*answer{&a, &b, nil},
			attempts: []string{"a-A", "a-B", ""},
			charge: &apiclient.CapturedCharge{Id: "c1", Amount: 1000, ProviderChargeId: "ch_1", CaptureStatus: apiclient.CaptureStatusCaptured,
				AmountCaptured: 800, Captures: []apiclient.Capture{{Id: "cap1", Amount: 300}, {Id: "cap2", Amount: 500, Final: true}}},
			authorization: &apiclient.ProviderCharge{ID: "ch_1", Status: "succeeded", CaptureMethod: "manual",
				AmountAuthorized: 1000, AmountCaptured: 800, AuthorizationStatus: "captured"},
			captures: []apiclient.ProviderCapture{
				providerCapture("pc_1", "A", 300, false, ""),
				providerCapture("pc_2", "B", 500, true, ""),
			},
		},
	}
}

// newVoidFixture is an authorization of 1000 voided, and a capture in full
// that came after the void and was refused; the provider holds the void
// once.
func newVoidFixture() *captureFixture {
	f := newCaptureFixture()
	v := answer{status: apiclient.Succeeded, id: "a-V"}
	f.keys = []*capture{voidKey(f.co, "V", v), captureKey(f.co, "C", 0, true, answer{status: codeVoided})}
	f.seen.stored, f.seen.attempts = []*answer{&v, nil}, []string{"a-V", ""}
	f.seen.charge.CaptureStatus, f.seen.charge.AmountCaptured, f.seen.charge.Captures = apiclient.CaptureStatusVoided, 0, nil
	f.seen.authorization.AmountCaptured, f.seen.authorization.AuthorizationStatus = 0, "voided"
	f.seen.captures, f.seen.voids = nil, []apiclient.ProviderVoid{providerVoid("pv_1", "V")}
	return f
}

// captureKey is a capture key of amount (0: all) of co's charge c1.
func captureKey(co *checkout, key string, amount int, final bool, told answer) *capture {
	cp := &capture{key: key, of: co, input: apiclient.CaptureInput{ChargeId: "c1", Final: &final}, record: record{answers: []answer{told}}}
	if amount > 0 {
		cp.input.Amount = &amount
	}
	return cp
}

// voidKey is a void key of co's charge c1.
func voidKey(co *checkout, key string, told answer) *capture {
	return &capture{key: key, of: co, void: true, input: apiclient.CaptureInput{ChargeId: "c1"}, record: record{answers: []answer{told}}}
}

// providerCapture is a provider's capture of ch_1 for the client's capture
// key, named for its attempt as chargeonce names it: made, or declined with
// declined as its failure code.
func providerCapture(id, key string, amount int64, final bool, declined string) apiclient.ProviderCapture {
	p := apiclient.ProviderCapture{ID: id, Charge: "ch_1", Amount: amount, Final: final, Status: "succeeded",
		IdempotencyKey: "chargeonce_a-" + key, Metadata: attemptMetadata(key, "capture")}
	if declined != "" {
		p.Status, p.FailureCode = "failed", &declined
	}
	return p
}

// providerVoid is a provider's void of ch_1 for the client's void key.
func providerVoid(id, key string) apiclient.ProviderVoid {
	return apiclient.ProviderVoid{ID: id, Charge: "ch_1", IdempotencyKey: "chargeonce_a-" + key, Metadata: attemptMetadata(key, "void")}
}

func attemptMetadata(key, kind string) map[string]string {
	return map[string]string{"chargeonce_attempt_id": "a-" + key, "chargeonce_kind": kind, "chargeonce_charge_id": "c1",
		"client_idempotency_key": key, "merchant": "demo"}
}

// TestCheckCaptures_FindsWhatWasCapturedTwiceBeyondLostOrAlsoVoided feeds
// the capture checker what a broken cluster could leave behind: a capture
// the provider made twice, more captured than authorized, a capture lost,
// an authorization both captured and voided, a refusal nothing explains, a
// failure the provider never gave, a capture or void not named for its
// attempt.
func TestCheckCaptures_FindsWhatWasCapturedTwiceBeyondLostOrAlsoVoided(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                      string
		fixture                   func() *captureFixture
		breaks                    func(f *captureFixture)
		twice, beyond, lost, both int
		problems                  int
	}{
		{"captured in parts, as told", newCaptureFixture, func(*captureFixture) {}, 0, 0, 0, 0, 0},
		{"voided, as told", newVoidFixture, func(*captureFixture) {}, 0, 0, 0, 0, 0},
		{"a capture refused while another failed", newCaptureFixture, func(f *captureFixture) {
			// The declined capture held 700 of the 1000 while the other was
			// refused: nothing the end shows explains the refusal, and it
			// need not.
			c := answer{status: apiclient.Failed, failure: "card_declined"}
			f.keys = append(f.keys, captureKey(f.co, "C", 150, false, c), captureKey(f.co, "D", 150, false, answer{status: codeCaptureExceeds}))
			f.seen.stored, f.seen.attempts = append(f.seen.stored, &c, nil), append(f.seen.attempts, "a-C", "")
			f.seen.captures = append(f.seen.captures, providerCapture("pc_3", "C", 150, false, "card_declined"))
		}, 0, 0, 0, 0, 0},

		{"captured twice at the provider", newCaptureFixture, func(f *captureFixture) {
			f.seen.captures = append(f.seen.captures, providerCapture("pc_3", "A", 300, false, ""))
		}, 1, 1, 0, 0, 4}, // twice; 1100 of 1000; not the amountCaptured; not what the provider's charge says
		{"a capture above the authorization", newCaptureFixture, func(f *captureFixture) {
			*f.keys[1].input.Amount = 800
			f.keys[1].answers[0].amount, f.seen.stored[1].amount = 800, 800
			f.seen.charge.AmountCaptured, f.seen.charge.Captures[1].Amount = 1100, 800
			f.seen.authorization.AmountCaptured, f.seen.captures[1].Amount = 1100, 800
		}, 0, 1, 0, 0, 1},
		{"above the authorization at the provider only", newCaptureFixture, func(f *captureFixture) {
			f.seen.captures[1].Amount = 800
		}, 0, 1, 0, 0, 4}, // 1100 of 1000; not the amountCaptured; not the provider's charge's; not what B took
		{"a capture lost", newCaptureFixture, func(f *captureFixture) { f.seen.stored[0] = nil }, 0, 0, 1, 0, 1},
		{"a capture that succeeded, failed now", newCaptureFixture, func(f *captureFixture) {
			f.seen.stored[1] = &answer{status: apiclient.Failed, failure: "card_declined"}
		}, 0, 0, 1, 0, 1},
		{"a void lost", newVoidFixture, func(f *captureFixture) { f.seen.stored[0] = nil }, 0, 0, 1, 0, 1},
		{"refused, and stored", newCaptureFixture, func(f *captureFixture) {
			f.seen.stored[2] = &answer{status: string(apiclient.CaptureAttemptStatusProcessing)}
		}, 0, 0, 1, 0, 1},
		{"a capture and a void both succeeded", newCaptureFixture, func(f *captureFixture) {
			v := answer{status: apiclient.Succeeded, id: "a-V"}
			f.keys[2].answers[0], f.seen.stored[2], f.seen.attempts[2] = v, &v, "a-V"
			f.seen.voids = []apiclient.ProviderVoid{providerVoid("pv_1", "V")}
		}, 0, 0, 0, 1, 1},
		{"captured, and voided at the provider", newCaptureFixture, func(f *captureFixture) {
			f.seen.voids = []apiclient.ProviderVoid{providerVoid("pv_1", "V")}
		}, 0, 0, 0, 1, 3}, // names no attempt (V was refused); voided for a refused key; both
		{"voided twice at the provider", newVoidFixture, func(f *captureFixture) {
			f.seen.voids = append(f.seen.voids, providerVoid("pv_2", "V"))
		}, 0, 0, 0, 0, 1},
		{"refused, and captured at the provider", newVoidFixture, func(f *captureFixture) {
			f.seen.captures = []apiclient.ProviderCapture{providerCapture("pc_9", "C", 1000, true, "")}
		}, 0, 0, 0, 1, 5}, // names no attempt; made for a refused key; both; not the amountCaptured; not the provider's charge's

		{"a capture refused though it fitted", newCaptureFixture, func(f *captureFixture) {
			*f.keys[1].input.Final = false
			f.seen.charge.CaptureStatus, f.seen.authorization.AuthorizationStatus = apiclient.CaptureStatusPartiallyCaptured, "open"
			f.seen.captures[1].Final = false
			f.keys = append(f.keys, captureKey(f.co, "C", 200, false, answer{status: codeCaptureExceeds}))
			f.seen.stored, f.seen.attempts = append(f.seen.stored, nil), append(f.seen.attempts, "")
		}, 0, 0, 0, 0, 1},
		{"a capture refused as voided, and no void succeeded", newCaptureFixture, func(f *captureFixture) {
			f.keys = append(f.keys, captureKey(f.co, "C", 0, true, answer{status: codeVoided}))
			f.seen.stored, f.seen.attempts = append(f.seen.stored, nil), append(f.seen.attempts, "")
		}, 0, 0, 0, 0, 1},
		{"a void refused as captured, and no capture succeeded", newVoidFixture, func(f *captureFixture) {
			f.keys[0].answers[0], f.seen.stored[0], f.seen.voids = answer{status: codeCaptured}, nil, nil
			f.seen.charge.CaptureStatus, f.seen.authorization.AuthorizationStatus = apiclient.CaptureStatusUncaptured, "open"
		}, 0, 0, 0, 0, 2}, // the void's refusal, and the capture's (no void succeeded)
		{"refused as expired", newCaptureFixture, func(f *captureFixture) { f.keys[2].answers[0].status = codeAuthExpired }, 0, 0, 0, 0, 1},
		{"failed for a reason the provider never gave", newCaptureFixture, func(f *captureFixture) {
			c := answer{status: apiclient.Failed, failure: "provider_unavailable"}
			f.keys = append(f.keys, captureKey(f.co, "C", 100, false, c))
			f.seen.stored, f.seen.attempts = append(f.seen.stored, &c), append(f.seen.attempts, "a-C")
		}, 0, 0, 0, 0, 1},
		{"a void failed", newVoidFixture, func(f *captureFixture) {
			v := answer{status: apiclient.Failed, failure: "charge_captured"}
			f.keys[0].answers[0], f.seen.stored[0], f.seen.voids = v, &v, nil
			f.seen.charge.CaptureStatus, f.seen.authorization.AuthorizationStatus = apiclient.CaptureStatusUncaptured, "open"
		}, 0, 0, 0, 0, 1},

		{"a provider capture named for no attempt", newCaptureFixture, func(f *captureFixture) {
			delete(f.seen.captures[0].Metadata, "chargeonce_attempt_id")
		}, 0, 0, 0, 0, 1},
		{"a provider capture under another key than its attempt's", newCaptureFixture, func(f *captureFixture) {
			f.seen.captures[0].IdempotencyKey = "chargeonce_a-B"
		}, 0, 0, 0, 0, 1},
		{"succeeded, never captured at the provider", newCaptureFixture, func(f *captureFixture) {
			f.seen.captures = f.seen.captures[1:]
		}, 0, 0, 0, 0, 3}, // no capture of A; 500 is not the amountCaptured, nor the provider's charge's
		{"amountCaptured is not the captures' sum", newCaptureFixture, func(f *captureFixture) { f.seen.charge.AmountCaptured = 300 }, 0, 0, 0, 0, 2},
		{"a capture no client was told of", newCaptureFixture, func(f *captureFixture) {
			f.seen.charge.Captures = append(f.seen.charge.Captures, apiclient.Capture{Id: "cap9", Amount: 100})
		}, 0, 0, 0, 0, 1},
		{"the charge is not what its keys make it", newCaptureFixture, func(f *captureFixture) {
			f.seen.charge.CaptureStatus = apiclient.CaptureStatusPartiallyCaptured
		}, 0, 0, 0, 0, 1},
		{"the provider's authorization is still open", newCaptureFixture, func(f *captureFixture) {
			f.seen.authorization.AuthorizationStatus = "open"
		}, 0, 0, 0, 0, 1},
		{"the charge is unknown now", newCaptureFixture, func(f *captureFixture) { f.seen.charge = nil }, 0, 0, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tc.fixture()
			tc.breaks(f)
			r := &run{report: &Report{}}
			r.checkCaptures(f.co, f.keys, f.seen)
			require.Equal(t, tc.twice, r.report.CapturedTwice, "captured twice")
			require.Equal(t, tc.beyond, r.report.CapturedBeyond, "captured beyond")
			require.Equal(t, tc.lost, r.report.CapturesLost, "captures lost")
			require.Equal(t, tc.both, r.report.CapturedAndVoided, "captured and voided")
			require.Len(t, r.report.Problems, tc.problems, "%v", r.report.Problems)
		})
	}
}

// TestCheckCaptures_CountsWhatSucceededFailedAndWasRefused checks the
// figures of a sound authorization.
func TestCheckCaptures_CountsWhatSucceededFailedAndWasRefused(t *testing.T) {
	t.Parallel()
	r := &run{report: &Report{}}
	f := newCaptureFixture()
	r.checkCaptures(f.co, f.keys, f.seen)
	f = newVoidFixture()
	r.checkCaptures(f.co, f.keys, f.seen)
	require.Empty(t, r.report.Problems)
	require.Equal(t, 2, r.report.CapturesSucceeded)
	require.Equal(t, 1, r.report.CapturesRefused)
	require.Equal(t, 1, r.report.VoidsSucceeded)
	require.Equal(t, 1, r.report.VoidsRefused)
	require.Equal(t, 2, r.report.ProviderCaptures)
	require.Equal(t, 1, r.report.ProviderVoids)
}

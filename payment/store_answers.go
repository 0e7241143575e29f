package payment

import (
	"context"

	"github.com/google/uuid"

	"chargeonce/db"
	"chargeonce/sqlc"
)

// storeAnswers writes rows in one statement.
func (s *store) storeAnswers(ctx context.Context, rows []storedAnswerRow) error {
	var p sqlc.StoreAnswersParams
	for _, r := range rows {
		p.MerchantID = append(p.MerchantID, r.merchant)
		p.RequestHash = append(p.RequestHash, r.hash)
		p.AttemptID = append(p.AttemptID, r.attempt)
		p.Kind = append(p.Kind, string(r.kind))
		p.IdempotencyKey = append(p.IdempotencyKey, r.key)
		p.ExpiresAt = append(p.ExpiresAt, r.expiresAt)
		p.Operation = append(p.Operation, r.operation)
		p.Answer = append(p.Answer, r.answer)
	}
	return s.q.StoreAnswers(ctx, p)
}

// storedAnswer reads the answer kept for the merchant's request hash, by
// the primary key; false when none is.
func (s *store) storedAnswer(ctx context.Context, merchantID uuid.UUID, hash []byte) (storedAnswerRow, bool, error) {
	row, err := s.q.StoredAnswer(ctx, sqlc.StoredAnswerParams{MerchantID: merchantID, RequestHash: hash})
	if kind, _ := db.Classify(err); kind == db.NotFound {
		return storedAnswerRow{}, false, nil
	}
	if err != nil {
		return storedAnswerRow{}, false, interpretError(err)
	}
	return storedAnswerRow{merchant: merchantID, hash: hash, attempt: row.AttemptID, kind: Kind(row.Kind),
		key: row.IdempotencyKey, expiresAt: row.ExpiresAt, operation: row.Operation, answer: row.Answer}, true, nil
}

package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/payment"
	"chargeonce/sqlc"
)

// ReceiptsConsumer is the durable consumer name of the receipts consumer.
const ReceiptsConsumer = "receipts"

// Receipts is the reference consumer of chargeonce's events: one receipt
// per successful charge in the receipts table, whose primary key is the
// event id. The insert is the effect and its own deduplication record, in
// one transaction; a redelivered event inserts nothing and is done.
// A consumer whose effect lives elsewhere records the event id in a table
// of its own in the same transaction as its effect, the same way.
func Receipts(pool *pgxpool.Pool, log *slog.Logger, fault func(string)) Consumer {
	return Consumer{
		Durable:     ReceiptsConsumer,
		Description: "chargeonce receipts: one receipt per successful charge",
		Subjects:    []string{payment.SubjectPrefix + payment.EventChargeSucceeded},
		Logger:      log,
		Fault:       fault,
		Handle: func(ctx context.Context, e payment.Event, _ []byte) error {
			if e.Type != payment.EventChargeSucceeded {
				return nil // the subject filter takes successes only
			}
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				n, err := sqlc.New(tx).InsertReceipt(ctx, receiptOf(e))
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation
					// Its merchant is not in this database: the event is
					// another chargeonce's, and no retry will change that.
					return fmt.Errorf("%w: merchant %s is not in this database", ErrMalformed, e.MerchantID)
				}
				if err != nil {
					return err
				}
				if n == 0 {
					log.Info("event already has its receipt: a redelivery, nothing to do", "event_id", e.ID)
				} else {
					log.Info("receipt issued", "event_id", e.ID, "charge_id", e.Charge.ID, "amount", e.Amount, "currency", e.Currency)
				}
				return nil
			})
		},
	}
}

func receiptOf(e payment.Event) sqlc.InsertReceiptParams {
	p := sqlc.InsertReceiptParams{
		EventID: e.ID, MerchantID: e.MerchantID, ChargeID: e.Charge.ID, IdempotencyKey: e.IdempotencyKey,
		Amount: e.Amount, Currency: e.Currency, ProviderChargeID: e.Charge.ProviderChargeID, ChargedAt: e.Charge.CreatedAt,
	}
	if e.OrderID != "" {
		p.OrderID = &e.OrderID
	}
	return p
}

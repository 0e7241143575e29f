package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/payment"
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
	st := newStore(pool)
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
			issued, err := st.insertReceipt(ctx, e)
			switch {
			case errors.Is(err, errForeignMerchant):
				// The event is another chargeonce's, and no retry will change that.
				return fmt.Errorf("%w: merchant %s is not in this database", ErrMalformed, e.MerchantID)
			case err != nil:
				return err
			case !issued:
				log.Info("event already has its receipt: a redelivery, nothing to do", "event_id", e.ID)
			default:
				log.Info("receipt issued", "event_id", e.ID, "charge_id", e.Charge.ID, "amount", e.Amount, "currency", e.Currency)
			}
			return nil
		},
	}
}

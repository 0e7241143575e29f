package payment_test

import (
	"time"

	"chargeonce/payment"
	"chargeonce/provider/providertest"
)

func init() {
	payment.NewMemoryProvider = func(now func() time.Time, slow time.Duration) payment.MemoryProvider {
		return providertest.NewMemory(providertest.MemoryOptions{Now: now, SlowDelay: slow})
	}
}

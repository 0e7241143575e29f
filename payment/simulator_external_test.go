package payment_test

import (
	"time"

	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
)

func init() {
	payment.NewSimulatorClient = func(baseURL string) payment.Provider {
		return simprovider.New(baseURL, 5*time.Second, nil)
	}
}

package payment

import "testing"

// NewSimulatorClient returns the client of the card simulator at baseURL:
// provider/cardsim's, which simulator_external_test.go sets. provider/cardsim
// imports this package, so only the external test package can import it;
// the tests in here charge through the real simulator all the same.
var NewSimulatorClient func(baseURL string) Provider

// simulatorClient is NewSimulatorClient(baseURL), for a test.
func simulatorClient(t testing.TB, baseURL string) Provider {
	t.Helper()
	if NewSimulatorClient == nil {
		t.Fatal("payment: NewSimulatorClient is not set (simulator_external_test.go sets it)")
	}
	return NewSimulatorClient(baseURL)
}

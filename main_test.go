package main

import (
	"os"
	"testing"

	"chargeonce/events/eventstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	eventstest.StopShared()
	os.Exit(code)
}

package app_test

import (
	"testing"

	"chargeonce/apitest"
)

func TestMain(m *testing.M) { apitest.Main(m) }

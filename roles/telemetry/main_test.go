package telemetry_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tracer providers' processors and exporters must stop on Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

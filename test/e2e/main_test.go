package e2e

import (
	"os"
	"testing"

	"github.com/jq-dev/jq/test/internal/jqbin"
)

func TestMain(m *testing.M) {
	os.Exit(jqbin.Main(m))
}

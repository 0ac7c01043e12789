package docs

import (
	"os"
	"testing"

	"github.com/jq-dev/jq/test/internal/jqbin"
)

func TestMain(m *testing.M) {
	if os.Getenv(grpcurlEnv) == "1" { // the shell blocks' grpcurl, when none is installed
		os.Exit(grpcurlMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(jqbin.Main(m))
}

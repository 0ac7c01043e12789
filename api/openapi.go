package api

import _ "embed" // for OpenAPI

// OpenAPI is the OpenAPI 3.1 document of the API's unary RPCs over Connect with JSON and
// MessagePack bodies (YAML), generated from the protos by `go tool -modfile=tools/go.mod task generate` (see
// api/openapi). The server serves it at GET /openapi.yaml.
//
//go:embed gen/openapi/jq.openapi.yaml
var OpenAPI []byte

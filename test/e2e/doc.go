// Package e2e holds the end-to-end tests of the built jq binary against the real Postgres and
// Redis: start-up, the API over its protocols, every role's process, the operator CLI, health,
// metrics, tracing, ports and authentication, and the abuse tests (TestAbuse…, docs/security.md).
// The binary is built once per run of the package (test/internal/jqbin).
package e2e

// Package faults holds the fault-injection tests of docs/reliability.md: the built jq binary with
// second-scale timeouts against a private PostgreSQL and redis-server per test, which a test may
// kill, pause or cut off, judged by internal/faultcheck. The flow-control tests of
// docs/flow-control.md run here too, on the same rig.
package faults

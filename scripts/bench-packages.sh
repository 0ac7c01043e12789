#!/usr/bin/env bash
# bench-packages.sh: the packages of this module (./...) that have a benchmark, one import path a
# line, for `task test`'s run of every benchmark once. Benchmarks get a `go test` of their own
# because with -bench go test runs the packages one after the other, after every build (cmd/go
# serialises benchmark runs); the tests need neither.
set -euo pipefail
cd "$(dirname "$0")/.."
go list -f '{{.ImportPath}} {{.Dir}}{{range .TestGoFiles}} {{.}}{{end}}{{range .XTestGoFiles}} {{.}}{{end}}' ./... |
	while read -r pkg dir files; do
		[[ -n $files ]] || continue
		for f in $files; do
			if grep -q '^func Benchmark' "$dir/$f"; then
				echo "$pkg"
				break
			fi
		done
	done

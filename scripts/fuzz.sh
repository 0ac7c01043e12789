#!/usr/bin/env bash
# fuzz.sh FUZZTIME [PACKAGES…]: runs every fuzz target of the module (default ./...) for FUZZTIME
# each, one after the other, as `go test -list '^Fuzz'` finds them: a new target is fuzzed without
# anyone adding it to a list. Run it under scripts/services.sh: some packages' TestMain needs
# Postgres, also to list. A failing input is written to its package's testdata/fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:?usage: fuzz.sh FUZZTIME [PACKAGES…]}
shift
# Only packages whose test files declare a fuzz function are listed: listing runs each package's
# TestMain, and some build the jq binary first.
pkgs=$(go list -f '{{.ImportPath}} {{.Dir}}{{range .TestGoFiles}} {{.}}{{end}}{{range .XTestGoFiles}} {{.}}{{end}}' "${@:-./...}" |
	while read -r pkg dir files; do
		for f in $files; do
			if grep -q '^func Fuzz' "$dir/$f"; then
				echo "$pkg"
				break
			fi
		done
	done)
# go test -list prints each package's matching names, then "ok <package> <time>".
listing=$(go test -list '^Fuzz' $pkgs)
targets=$(awk '/^Fuzz/ { names = names " " $1; next }
	/^ok / { if (names != "") print $2 names; names = "" }' <<<"$listing")
if [[ -z $pkgs || -z $targets ]]; then
	echo "fuzz.sh: no fuzz target found" >&2
	exit 1
fi
n=0
while read -r pkg names; do
	for name in $names; do
		echo "fuzz.sh: $pkg $name for $fuzztime"
		go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg"
		n=$((n + 1))
	done
done <<<"$targets"
echo "fuzz.sh: $n fuzz targets fuzzed"

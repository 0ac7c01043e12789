#!/usr/bin/env bash
# The SDKs' own tests (sdk/python, sdk/typescript) against a real jq server they start, with one jq binary
# built here. A language whose runtime is missing is skipped with a message, never failed.
#   scripts/test-sdks.sh [python] [typescript] [conformance]     (default: all three; conformance
#   uses the TypeScript build, so it comes after typescript)
set -euo pipefail
cd "$(dirname "$0")/.."
langs=("$@")
[ ${#langs[@]} -eq 0 ] && langs=(python typescript conformance)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "${JQ_BIN:-}" ]; then
  go build -o "$tmp/jq" .
  export JQ_BIN="$tmp/jq"
fi

for lang in "${langs[@]}"; do
  case "$lang" in
  python)
    if ! command -v python3 >/dev/null || ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      echo "SKIP sdk/python: python3 >= 3.11 is not installed" >&2
      continue
    fi
    (cd sdk/python/tests && python3 -m unittest -v 2>&1)
    ;;
  typescript)
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
      echo "SKIP sdk/typescript: node and npm are not installed" >&2
      continue
    fi
    (cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error)
    # The committed TypeScript types must be what buf and protoc-gen-es make of api/proto now.
    go tool -modfile=tools/go.mod buf generate --template sdk/typescript/buf.gen.yaml --path api/proto/jq/v1 --output "$tmp/gen"
    if ! diff -r "$tmp/gen/sdk/typescript/src/gen" sdk/typescript/src/gen; then
      echo "sdk/typescript/src/gen is stale: run 'go tool -modfile=tools/go.mod task generate:typescript' and commit the result" >&2
      exit 1
    fi
    (cd sdk/typescript && npm test)
    ;;
  conformance)
    # Every worker implementation through the same scenarios (internal/conformance); languages whose
    # runtime or build is missing are skipped there with a message.
    JQ_CONFORMANCE=1 go test -race -count=1 -run '^(TestConformance|TestCrossLanguage)$' -v ./internal/conformance 2>&1 |
      grep -v -E '^=== |^ +--- PASS'
    ;;
  *)
    echo "unknown SDK $lang (python, typescript)" >&2
    exit 2
    ;;
  esac
done

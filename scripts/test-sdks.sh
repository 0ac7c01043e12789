#!/usr/bin/env bash
# The SDKs' own tests (sdk/python, sdk/typescript) against a real jq server they start, with one jq binary
# built here. A language whose runtime is missing is skipped with a message, never failed.
#   scripts/test-sdks.sh [python] [typescript] [conformance]     (default: all three; conformance
#   uses the TypeScript build, so it comes after typescript)
# Python runs beside the others (its output follows theirs): the SDK tests mostly wait on their
# servers, on backoffs and heartbeat timeouts, not on the CPU.
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

run_lang() {
  local lang=$1
  case "$lang" in
  python)
    if ! command -v python3 >/dev/null || ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      echo "SKIP sdk/python: python3 >= 3.11 is not installed" >&2
      return 0
    fi
    (cd sdk/python/tests && python3 -m unittest -v 2>&1)
    ;;
  typescript)
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
      echo "SKIP sdk/typescript: node and npm are not installed" >&2
      return 0
    fi
    (cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error)
    # The committed TypeScript types must be what buf and protoc-gen-es make of api/proto now.
    go tool -modfile=tools/go.mod buf generate --template sdk/typescript/buf.gen.yaml --path api/proto/jq/v1 --output "$tmp/gen"
    if ! diff -r "$tmp/gen/sdk/typescript/src/gen" sdk/typescript/src/gen; then
      echo "sdk/typescript/src/gen is stale: run 'go tool -modfile=tools/go.mod task generate:typescript' and commit the result" >&2
      return 1
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
    echo "unknown SDK $lang (python, typescript, conformance)" >&2
    return 2
    ;;
  esac
}

# Each language in a subshell waited for (set -e holds inside it); python in the background when
# others run too.
rc=0
py_pid=''
rest=()
for lang in "${langs[@]}"; do
  if [[ $lang == python && ${#langs[@]} -gt 1 ]]; then
    run_lang python >"$tmp/python.out" 2>&1 &
    py_pid=$!
  else
    rest+=("$lang")
  fi
done
for lang in "${rest[@]}"; do
  run_lang "$lang" &
  wait $! || { rc=$?; break; }
done
if [[ -n $py_pid ]]; then
  py_rc=0
  wait "$py_pid" || py_rc=$?
  echo "--- sdk/python (ran beside the others)"
  cat "$tmp/python.out"
  ((rc)) || rc=$py_rc
fi
exit "$rc"

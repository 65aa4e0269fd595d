#!/usr/bin/env bash
# Fuzzes every route of the dashboard's API from its OpenAPI document with schemathesis
# (https://schemathesis.readthedocs.io, from PyPI): no 5xx, no answer that breaks its schema or
# its documented statuses, every refusal a JSON error. The dashboard runs on 127.0.0.1 over a
# fresh SQLite queue seeded with tasks in every state (retry-queue/examples/fuzz_target.rs),
# with a token.
#
#   bash scripts/schemathesis.sh            # installs schemathesis in a venv when missing
#   SCHEMATHESIS=/path/to/st bash scripts/schemathesis.sh
#
# MAX_EXAMPLES (default 30) bounds the examples per operation: the whole run takes about a
# minute once the example is built.
set -euo pipefail
cd "$(dirname "$0")/.."

max_examples="${MAX_EXAMPLES:-30}"
st="${SCHEMATHESIS:-}"
if [[ -z "$st" ]]; then
  if command -v schemathesis >/dev/null 2>&1; then
    st=$(command -v schemathesis)
  else
    venv="${SCHEMATHESIS_VENV:-${TMPDIR:-/tmp}/retry-queue-schemathesis}"
    if [[ ! -x "$venv/bin/schemathesis" ]]; then
      python3 -m venv "$venv"
      "$venv/bin/pip" install --quiet 'schemathesis>=4,<5'
    fi
    st="$venv/bin/schemathesis"
  fi
fi
"$st" --version

cargo build --quiet -p retry-queue --example fuzz_target
bin="${CARGO_TARGET_DIR:-target}/debug/examples/fuzz_target"

dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
RETRY_QUEUE_TOKEN="$token" "$bin" "$dir" "$port" >"$dir/serve.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do
  grep -q '^ready' "$dir/serve.log" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/serve.log" >&2; exit 1; }
  sleep 0.1
done
grep -q '^ready' "$dir/serve.log" || { echo "the dashboard did not start" >&2; cat "$dir/serve.log" >&2; exit 1; }

url="http://127.0.0.1:$port"
# schemathesis keeps a cache in its working directory: the run's temporary one, not the checkout.
cd "$dir"
# The document the server serves is the one checked in (a test holds them equal); fuzz from
# the served one. The checks: no 5xx; each status documented; each answer's content type and
# body match the document (every refusal documented as {"error"}).
# schemathesis leaves the route that serves the document out of a whole run ("16 selected /
# 16 total"): a second, small run covers it.
for only in "" "--include-path /api/openapi.json"; do
  "$st" run "$url/api/openapi.json" \
    --url "$url" \
    --header "Authorization: Bearer $token" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --max-examples "$max_examples" \
    --phases examples,coverage,fuzzing \
    --seed 1 \
    --no-color \
    --request-timeout 10 \
    --max-failures 20 \
    ${SCHEMATHESIS_ARGS:-} $only
done

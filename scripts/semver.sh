#!/usr/bin/env bash
# A public surface kept on purpose: `cargo semver-checks` compares the published library crates
# with the commit BASE (default HEAD~1, the previous commit of main), and a breaking change
# passes only when the same commits add a line under `### Breaking` in CHANGELOG.md's
# `## [Unreleased]` section: the break is then deliberate, and its users are told. Prints what
# it found either way.
#
# usage: bash scripts/semver.sh [BASE]
#
# Checked: retry-rules, retry-runtime, retry-queue. retry-runtime-macros is a proc-macro crate:
# its API is its macros' input, which the trybuild cases (tests/ui) pin, and semver-checks skips
# such crates. retry-runtime is checked with the features of its public API, all but
# `test-util` (handles for this workspace's tests and benches, no stability promise).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}

if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  if [[ "$(git rev-parse --is-shallow-repository)" == true ]]; then
    echo "a shallow clone: fetching the history down to $base"
    git fetch --quiet --deepen=1 origin || true
  fi
fi
if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  if [[ "$(git rev-list --count HEAD)" == 1 && "$(git rev-parse --is-shallow-repository)" == false ]]; then
    echo "semver: HEAD is the first commit, nothing to compare with"
    exit 0
  fi
  echo "semver: no commit $base in this clone (a shallow clone without its origin?): cannot check the public surface" >&2
  exit 1
fi
echo "semver: comparing HEAD ($(git rev-parse --short HEAD)) with $base ($(git rev-parse --short "$base"))"

# The lines under `### Breaking` of `## [Unreleased]` in a CHANGELOG.md (stdin).
breaking_lines() {
  awk '
    /^## / { unreleased = ($0 ~ /^## \[Unreleased\]/); section = ""; next }
    /^### / { section = $0; next }
    unreleased && section == "### Breaking" && NF > 0 { print }
  '
}
# The lines of BASE's section, one pattern each (none when BASE has no CHANGELOG.md).
before=$(mktemp)
{ git show "$base:CHANGELOG.md" 2>/dev/null || true; } | breaking_lines >"$before"
# The section's lines now that BASE did not have, in their order.
added=$(breaking_lines <CHANGELOG.md | grep -vxF -f "$before" || true)

# retry-runtime's features, less `test-util` and the internal `_…` ones: those of both commits
# for both, a feature new since BASE for the current one only.
mapfile -t feature_args < <(git show "$base:retry-runtime/Cargo.toml" | python3 -c '
import sys, tomllib
old = set(tomllib.loads(sys.stdin.read()).get("features", {}))
new = set(tomllib.load(open("retry-runtime/Cargo.toml", "rb"))["features"])
for f in sorted(new):
    if f == "test-util" or f.startswith("_"):
        continue
    print("--features" if f in old else "--current-features")
    print(f)
')
echo "semver: retry-runtime checked with: ${feature_args[*]}"

log=$(mktemp)
status=0
cargo semver-checks --baseline-rev "$base" -p retry-rules -p retry-queue 2>&1 | tee "$log" ||
  status=$?
cargo semver-checks --baseline-rev "$base" -p retry-runtime --only-explicit-features \
  "${feature_args[@]}" 2>&1 | tee -a "$log" || status=$?

if [[ $status == 0 ]]; then
  echo "semver: no breaking change in the public surface since $base"
  if [[ -n "$added" ]]; then
    echo "semver: CHANGELOG.md adds under ### Breaking (not seen by semver-checks; kept):"
    echo "$added"
  fi
  exit 0
fi
# Before 1.0 a breaking change asks for a new minor version, after it for a new major one.
if ! grep -Eq "semver requires new (major|minor) version" "$log"; then
  echo "semver: cargo semver-checks failed without a verdict (see above)" >&2
  exit "$status"
fi
if [[ -z "$added" ]]; then
  echo "semver: a BREAKING change since $base (above), and no line added under \`### Breaking\`" >&2
  echo "        in CHANGELOG.md's [Unreleased] section: say what breaks and what users do, or" >&2
  echo "        keep the old surface." >&2
  exit 1
fi
echo "semver: a breaking change since $base (above), deliberate: CHANGELOG.md adds under ### Breaking:"
echo "$added"

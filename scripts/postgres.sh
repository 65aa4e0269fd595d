#!/usr/bin/env bash
# A throwaway PostgreSQL for the durable queue's tests, examples and benchmarks.
#
#   eval "$(scripts/postgres.sh)"          # start one; exports RETRY_TEST_POSTGRES_URL
#   cargo test --workspace                 # the PostgreSQL tests now run instead of skipping
#   scripts/postgres.sh stop "$RETRY_TEST_POSTGRES_DIR"   # stop it and delete its files
#   scripts/postgres.sh serve-while PID    # start one, stopped and deleted once process PID ends
#
# `start` (the default) creates a new cluster in a fresh temp dir (initdb, as the `postgres` user
# when run as root: the server refuses to run as root), starts it on 127.0.0.1 only, on a free
# port, with its unix socket inside the temp dir, creates the database `retry_test`, and prints
# two `export` lines for the shell (everything else goes to stderr). Local connections are
# trusted: the cluster is only reachable from this machine and lives as long as you keep it.
# Nothing outside the temp dir is touched, so it can run any number of times, next to a system
# PostgreSQL or another throwaway cluster.
#
# The server binaries are looked up in /usr/lib/postgresql/*/bin, then on PATH (set PG_BINDIR to
# choose). When there are none and this runs as root with apt-get (CI, a fresh Debian machine),
# `start` runs `apt-get update && apt-get install -y postgresql` first.
#
# PG_SERVER_OPTIONS adds server options to `start`, e.g.
# PG_SERVER_OPTIONS='-c shared_preload_libraries=pg_stat_statements' for benches/benches/durable_profile.rs.
#
# `serve-while PID` is what the test suites use when RETRY_TEST_POSTGRES_URL is not set: it never
# installs anything (exit status 3 when there are no server binaries: the tests then say they
# skip), starts a cluster like `start`, prints the same two lines, and leaves a watcher that
# stops and deletes the cluster once process PID (the test process) has ended.
#
# Streaming replication, for the failover test (tests/tests/durable/failover.rs):
#
#   scripts/postgres.sh standby PRIMARY_DIR [sync|async] [PID]
#   scripts/postgres.sh promote DIR
#
# `standby` copies the running cluster of PRIMARY_DIR (one this script started) with
# `pg_basebackup -R` into a fresh temp dir, starts the copy as a hot standby on another free
# port of 127.0.0.1, waits until it streams from the primary, and prints
# `export RETRY_TEST_STANDBY_URL=…` and `export RETRY_TEST_STANDBY_DIR=…`. `sync` (the
# default) then makes the primary wait for it at each commit (`synchronous_standby_names = '*'`,
# as managed failover does: a commit the client saw is on the standby); `async` leaves it
# asynchronous. PG_STANDBY_SOURCE=HOST:PORT makes it replicate through that address (a test's
# proxy in front of the primary). Given PID, a watcher stops and deletes the standby once process PID ends, as
# `serve-while` does. It never installs anything: exit status 3 without server binaries.
# `promote DIR` promotes a standby (`pg_ctl promote -w`): it stops replaying and accepts writes.
# `stop DIR` stops either.
set -euo pipefail

log() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

find_bindir() {
  if [[ -n "${PG_BINDIR:-}" ]]; then
    [[ -x "$PG_BINDIR/initdb" ]] && { echo "$PG_BINDIR"; return 0; }
    return 1
  fi
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ -n "$dir" && -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then
    echo "$dir"
    return 0
  fi
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v initdb)")"
    return 0
  fi
  return 1
}

# as_owner, port_in_use, install_or_die, owned_temp_dir, stop_when_gone.
# shellcheck source=scripts/throwaway.sh
source "$(dirname "${BASH_SOURCE[0]}")/throwaway.sh"

# Starts the cluster of DIR (binaries in BINDIR) on the first free port from a random start,
# with the server options OPTIONS; prints the port. A port taken between the check and the
# start makes pg_ctl fail, and the next one is tried.
start_on_free_port() {
  local dir=$1 bindir=$2 options=$3 candidate
  candidate=$(first_candidate_port)
  for _ in $(seq 1 20); do
    candidate=$((candidate + 1))
    if port_in_use "$candidate"; then continue; fi
    if (cd "$dir" && as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -c port=$candidate -c unix_socket_directories=$dir -c max_connections=300 $options" \
      start >/dev/null 2>&1); then
      echo "$candidate"
      return 0
    fi
    log "could not start on port $candidate; trying the next one"
    tail -n 5 "$dir/server.log" >&2 2>/dev/null || true
  done
  return 1
}

start() {
  local bindir
  if ! bindir=$(find_bindir); then
    install_or_die postgresql \
      "no PostgreSQL server binaries (initdb, pg_ctl); install them, e.g. 'sudo apt-get install postgresql', or set PG_BINDIR"
    bindir=$(find_bindir) || die "postgresql installed, but no initdb/pg_ctl found"
  fi

  local dir
  dir=$(owned_temp_dir retry-postgres)

  # initdb and pg_ctl as the owner, from inside the temp dir (the owner may not be able to read
  # the current directory).
  (cd "$dir" && as_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
    --locale=C --no-sync >"$dir/initdb.log" 2>&1) ||
    { cat "$dir/initdb.log" >&2; die "initdb failed (log above)"; }

  local port
  port=$(start_on_free_port "$dir" "$bindir" "${PG_SERVER_OPTIONS:-}") ||
    die "PostgreSQL did not start (log: $dir/server.log)"

  (cd "$dir" && as_owner "$bindir/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
    -v ON_ERROR_STOP=1 -c "CREATE DATABASE retry_test") >&2 ||
    { stop "$dir"; die "CREATE DATABASE failed"; }

  echo "$bindir" >"$dir/bindir"
  local url="postgres://postgres@127.0.0.1:$port/retry_test"
  log "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, files in $dir"
  log "stop it with: scripts/postgres.sh stop $dir"
  echo "export RETRY_TEST_POSTGRES_URL=$url"
  echo "export RETRY_TEST_POSTGRES_DIR=$dir"
}

stop() {
  local dir=${1:-${RETRY_TEST_POSTGRES_DIR:-}}
  [[ -n "$dir" ]] || die "usage: scripts/postgres.sh stop DIR (the DIR that start printed)"
  [[ -d "$dir" ]] || { log "$dir does not exist: nothing to stop"; return 0; }
  # Only ever a dir this script made: refuse anything else before deleting it.
  [[ $(basename "$dir") == retry-postgres.* ]] || die "$dir was not made by this script"
  local bindir
  bindir=$(cat "$dir/bindir" 2>/dev/null || find_bindir || true)
  if [[ -n "$bindir" && -f "$dir/data/postmaster.pid" ]]; then
    (cd "$dir" && as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1) ||
      log "pg_ctl stop failed (already stopped?)"
  fi
  rm -rf "$dir"
  log "stopped and removed $dir"
}

serve_while() {
  local pid=${1:-}
  [[ "$pid" =~ ^[0-9]+$ ]] || die "usage: scripts/postgres.sh serve-while PID"
  find_bindir >/dev/null || { log "no PostgreSQL server binaries on this machine"; exit 3; }
  local exports dir
  exports=$(start)
  dir=$(sed -n 's/^export RETRY_TEST_POSTGRES_DIR=//p' <<<"$exports")
  stop_when_gone "$pid" "$0" "$dir"
  echo "$exports"
}

# Runs SQL on the cluster of DIR (its port read from its postmaster.pid) and prints the result.
psql_in() {
  local dir=$1 sql=$2 bindir port
  bindir=$(cat "$dir/bindir")
  port=$(sed -n 4p "$dir/data/postmaster.pid")
  (cd "$dir" && as_owner "$bindir/psql" -X -q -A -t -h 127.0.0.1 -p "$port" -U postgres \
    -d postgres -v ON_ERROR_STOP=1 -c "$sql")
}

standby() {
  local primary=${1:-} mode=${2:-sync} pid=${3:-}
  [[ -n "$primary" && -f "$primary/data/postmaster.pid" ]] ||
    die "usage: scripts/postgres.sh standby PRIMARY_DIR [sync|async] [PID] (a running cluster this script started)"
  [[ "$mode" == sync || "$mode" == async ]] || die "standby mode: sync or async, not $mode"
  find_bindir >/dev/null || { log "no PostgreSQL server binaries on this machine"; exit 3; }
  local bindir primary_port dir
  bindir=$(cat "$primary/bindir")
  [[ -x "$bindir/pg_basebackup" ]] || { log "no pg_basebackup in $bindir"; exit 3; }
  primary_port=$(sed -n 4p "$primary/data/postmaster.pid")
  dir=$(owned_temp_dir retry-postgres)
  echo "$bindir" >"$dir/bindir"
  # -R writes primary_conninfo and standby.signal: the copy starts as a standby of the primary.
  # PG_STANDBY_SOURCE=HOST:PORT: replicate through that address (a test's proxy in front of the
  # primary, to delay the stream) instead of the primary's own port.
  local source_host=127.0.0.1 source_port=$primary_port
  if [[ -n "${PG_STANDBY_SOURCE:-}" ]]; then
    source_host=${PG_STANDBY_SOURCE%:*}
    source_port=${PG_STANDBY_SOURCE##*:}
  fi
  (cd "$dir" && as_owner "$bindir/pg_basebackup" -h "$source_host" -p "$source_port" -U postgres \
    -D "$dir/data" -R -X stream -c fast -d "application_name=standby" >"$dir/basebackup.log" 2>&1) ||
    { cat "$dir/basebackup.log" >&2; rm -rf "$dir"; die "pg_basebackup failed (log above)"; }
  local port=""
  port=$(start_on_free_port "$dir" "$bindir" "-c hot_standby=on") || port=""
  [[ -n "$port" ]] || { tail -n 20 "$dir/server.log" >&2 || true; stop "$dir"; die "the standby did not start"; }
  local streaming=""
  for _ in $(seq 1 100); do
    if [[ $(psql_in "$primary" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") -ge 1 ]]; then
      streaming=1
      break
    fi
    sleep 0.1
  done
  [[ -n "$streaming" ]] || { stop "$dir"; die "the standby did not stream within 10 s"; }
  if [[ "$mode" == sync ]]; then
    psql_in "$primary" "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
    psql_in "$primary" "SELECT pg_reload_conf()" >/dev/null
  fi
  [[ -z "$pid" ]] || stop_when_gone "$pid" "$0" "$dir"
  log "standby ($mode) of $primary on 127.0.0.1:$port, files in $dir"
  echo "export RETRY_TEST_STANDBY_URL=postgres://postgres@127.0.0.1:$port/retry_test"
  echo "export RETRY_TEST_STANDBY_DIR=$dir"
}

promote() {
  local dir=${1:-}
  [[ -n "$dir" && -f "$dir/data/standby.signal" ]] || die "usage: scripts/postgres.sh promote DIR (a standby this script started)"
  (cd "$dir" && as_owner "$(cat "$dir/bindir")/pg_ctl" -D "$dir/data" -w -t 60 promote >&2) ||
    die "pg_ctl promote failed"
}

case "${1:-start}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  serve-while) serve_while "${2:-}" ;;
  standby) standby "${2:-}" "${3:-}" "${4:-}" ;;
  promote) promote "${2:-}" ;;
  *) die "usage: scripts/postgres.sh [start | stop DIR | serve-while PID | standby PRIMARY_DIR [sync|async] [PID] | promote DIR]" ;;
esac

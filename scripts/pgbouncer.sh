#!/usr/bin/env bash
# A throwaway PgBouncer in transaction pooling mode in front of a PostgreSQL server, for the
# durable queue's tests and benchmarks (issue 43: production PostgreSQL sits behind a pooler).
#
#   eval "$(scripts/postgres.sh)"                                   # a server first
#   eval "$(scripts/pgbouncer.sh start "$RETRY_TEST_POSTGRES_URL")" # exports RETRY_TEST_PGBOUNCER_URL
#   cargo test --workspace                 # the PgBouncer tests now run through it
#   scripts/pgbouncer.sh stop "$RETRY_TEST_PGBOUNCER_DIR"           # stop it and delete its files
#   scripts/pgbouncer.sh serve-while PID URL   # start one, stopped and deleted once process PID ends
#
# `start URL` writes a configuration into a fresh temp dir and starts `pgbouncer` (as the
# `postgres` user when run as root: pgbouncer refuses to run as root) on a free port of
# 127.0.0.1, configured as deployments run it: `pool_mode = transaction` and
# `ignore_startup_parameters = extra_float_digits` (the parameter sqlx, like most drivers, sends
# at connect). Every database of the server of URL is reachable through it (a wildcard
# `[databases] * = host=… port=…`: the tests create databases of their own), as any user
# (`auth_type = trust`: only this machine reaches it); the printed URL is URL with its host and
# port replaced. It prints two `export` lines for the shell (everything else goes to stderr).
#
# PGBOUNCER_IGNORE_STARTUP_PARAMETERS replaces `extra_float_digits` (e.g.
# `extra_float_digits,options`: a pooler that ignores the `options` parameter, which the queue
# then cannot detect; tests/tests/durable/pgbouncer.rs).
#
# The binary is looked up on PATH, then /usr/sbin (set PGBOUNCER to choose). When there is none
# and this runs as root with apt-get (CI, a fresh Debian machine), `start` runs
# `apt-get install -y pgbouncer` first. `serve-while PID URL` (what the test suites use when
# RETRY_TEST_PGBOUNCER_URL is not set) never installs anything: exit status 3 without the
# binary (the tests then say they skip); otherwise it starts one like `start` and leaves a
# watcher that stops it and deletes its files once process PID has ended.
set -euo pipefail

log() { printf 'pgbouncer.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

find_pgbouncer() {
  if [[ -n "${PGBOUNCER:-}" ]]; then
    [[ -x "$PGBOUNCER" ]] && { echo "$PGBOUNCER"; return 0; }
    return 1
  fi
  if command -v pgbouncer >/dev/null 2>&1; then
    command -v pgbouncer
    return 0
  fi
  [[ -x /usr/sbin/pgbouncer ]] && { echo /usr/sbin/pgbouncer; return 0; }
  return 1
}

# as_owner, port_in_use, install_or_die, owned_temp_dir, stop_when_gone.
# shellcheck source=scripts/throwaway.sh
source "$(dirname "${BASH_SOURCE[0]}")/throwaway.sh"

# The parts of postgres://user[:password]@host:port/database[?query] that PgBouncer needs.
parse_url() {
  local url=$1 rest authority
  [[ "$url" =~ ^postgres(ql)?:// ]] || die "not a postgres:// URL: $url"
  rest=${url#*://}
  authority=${rest%%/*}
  URL_USER=postgres
  if [[ "$authority" == *@* ]]; then
    URL_USER=${authority%%@*}
    URL_USER=${URL_USER%%:*}
    authority=${authority#*@}
  fi
  URL_HOST=${authority%%:*}
  URL_PORT=5432
  [[ "$authority" == *:* ]] && URL_PORT=${authority##*:}
  URL_PATH=${rest#"${rest%%/*}"}
  URL_SCHEME=${url%%://*}
  URL_PREFIX=${rest%%@*}
  [[ "$rest" == *@* ]] || URL_PREFIX=""
}

start() {
  local server_url=${1:-${RETRY_TEST_POSTGRES_URL:-}}
  [[ -n "$server_url" ]] || die "usage: scripts/pgbouncer.sh start URL (the server's postgres:// URL)"
  parse_url "$server_url"
  local binary
  if ! binary=$(find_pgbouncer); then
    install_or_die pgbouncer \
      "no pgbouncer binary; install it, e.g. 'sudo apt-get install pgbouncer', or set PGBOUNCER"
    binary=$(find_pgbouncer) || die "pgbouncer installed, but not found"
  fi

  local dir
  dir=$(owned_temp_dir retry-pgbouncer)
  # trust still needs the user names in the auth file; the server's own user, and the usual one.
  printf '"%s" ""\n"postgres" ""\n' "$URL_USER" >"$dir/users.txt"

  local port="" candidate started=""
  candidate=$(first_candidate_port)
  for _ in $(seq 1 20); do
    candidate=$((candidate + 1))
    if port_in_use "$candidate"; then continue; fi
    # Sizes: the suites open hundreds of client connections at once (max_client_conn); each
    # database gets a modest pool of server connections (default_pool_size), all of them
    # together stay below the server's max_connections (300 for scripts/postgres.sh) beside the
    # tests' direct connections (max_user_connections; idle ones of another database are
    # closed to make room), and the databases the tests create and drop are forgotten soon.
    cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=$URL_HOST port=$URL_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $candidate
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
ignore_startup_parameters = ${PGBOUNCER_IGNORE_STARTUP_PARAMETERS:-extra_float_digits}
max_client_conn = 2000
default_pool_size = 20
max_user_connections = 150
server_idle_timeout = 10
autodb_idle_timeout = 30
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
admin_users = $URL_USER
EOF
    chown -R postgres: "$dir" 2>/dev/null || true
    if (cd "$dir" && as_owner "$binary" -d "$dir/pgbouncer.ini" >/dev/null 2>&1); then
      # -d returns once it forked; wait until it answers on the port.
      for _ in $(seq 1 50); do
        if port_in_use "$candidate"; then started=1; break; fi
        sleep 0.1
      done
    fi
    if [[ -n "$started" ]]; then port=$candidate; break; fi
    log "could not start on port $candidate; trying the next one"
    tail -n 5 "$dir/pgbouncer.log" >&2 2>/dev/null || true
    kill_pgbouncer "$dir"
  done
  [[ -n "$started" ]] || die "pgbouncer did not start (log: $dir/pgbouncer.log)"

  local url="$URL_SCHEME://"
  [[ -n "$URL_PREFIX" ]] && url+="$URL_PREFIX@"
  url+="127.0.0.1:$port$URL_PATH"
  log "$("$binary" --version | head -n 1) (transaction pooling) on 127.0.0.1:$port in front of $URL_HOST:$URL_PORT, files in $dir"
  log "stop it with: scripts/pgbouncer.sh stop $dir"
  echo "export RETRY_TEST_PGBOUNCER_URL=$url"
  echo "export RETRY_TEST_PGBOUNCER_DIR=$dir"
}

kill_pgbouncer() {
  local dir=$1 pid
  pid=$(cat "$dir/pgbouncer.pid" 2>/dev/null || true)
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

stop() {
  local dir=${1:-${RETRY_TEST_PGBOUNCER_DIR:-}}
  [[ -n "$dir" ]] || die "usage: scripts/pgbouncer.sh stop DIR (the DIR that start printed)"
  [[ -d "$dir" ]] || { log "$dir does not exist: nothing to stop"; return 0; }
  [[ $(basename "$dir") == retry-pgbouncer.* ]] || die "$dir was not made by this script"
  kill_pgbouncer "$dir"
  rm -rf "$dir"
  log "stopped and removed $dir"
}

serve_while() {
  local pid=${1:-} url=${2:-}
  [[ "$pid" =~ ^[0-9]+$ && -n "$url" ]] || die "usage: scripts/pgbouncer.sh serve-while PID URL"
  find_pgbouncer >/dev/null || { log "no pgbouncer binary on this machine"; exit 3; }
  local exports dir
  exports=$(start "$url")
  dir=$(sed -n 's/^export RETRY_TEST_PGBOUNCER_DIR=//p' <<<"$exports")
  stop_when_gone "$pid" "$0" "$dir"
  echo "$exports"
}

case "${1:-start}" in
  start) start "${2:-}" ;;
  stop) stop "${2:-}" ;;
  serve-while) serve_while "${2:-}" "${3:-}" ;;
  *) die "usage: scripts/pgbouncer.sh [start URL | stop DIR | serve-while PID URL]" ;;
esac

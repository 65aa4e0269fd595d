# What scripts/postgres.sh and scripts/pgbouncer.sh share (sourced, not run): the throwaway
# servers of the tests live in temp dirs owned by `postgres` when run as root (neither server
# runs as root), on a free port of 127.0.0.1, and are stopped by a watcher once the test process
# that asked for them ends. The sourcing script defines `log` and `die` first.

# Runs a command as the owner of the files: `postgres` when we are root, ourselves otherwise.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# Whether something listens on 127.0.0.1:PORT (a successful connect).
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A port from a random start that nothing listens on: a start point for `start_on_free_port`.
first_candidate_port() {
  echo $((20000 + RANDOM % 40000))
}

# `apt-get install PACKAGE` when we are root with apt-get (CI, a fresh Debian machine); dies with
# HINT otherwise. The caller looks the binary up again afterwards.
install_or_die() {
  local package=$1 hint=$2
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "no $package found: apt-get install -y $package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y --no-install-recommends "$package" >&2
  else
    die "$hint"
  fi
}

# A fresh temp dir named PREFIX.XXXXXX, readable by all and owned by the servers' user.
owned_temp_dir() {
  local prefix=$1 dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX")
  chmod 755 "$dir"
  if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root needs the 'postgres' user (apt-get install postgresql creates it)"
    chown postgres: "$dir"
  fi
  echo "$dir"
}

# Runs `SCRIPT stop DIR` once process PID has ended. The watcher holds none of our output pipes,
# so the caller reading them is not kept waiting.
stop_when_gone() {
  local pid=$1 script=$2 dir=$3
  setsid nohup bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" stop "$3"' \
    watcher "$pid" "$script" "$dir" </dev/null >/dev/null 2>&1 &
}

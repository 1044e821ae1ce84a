#!/usr/bin/env bash
# Load on a release `stacklens serve` on 127.0.0.1, once over a temp file:// folder and
# once over SeaweedFS (s3://test): small and large uploads of distinct profiles, raw
# GETs, diffs, then 1,000 uploads all in flight at once, read back and listed
# (backend/examples/load/). Prints a Markdown table for BENCHMARKS.md.
# With `history`: pushes a long history of one service, then measures listing pages and
# one-hour range queries over it (backend/examples/load/history.rs).
# With `fleet`: pushes one service's DAYS days and SERVICES services' last day, waits
# for the server's compactor to make every closed hour's block, then measures day to
# month range queries over them and what the blocks take on disk (backend/examples/load/fleet.rs).
# Usage: scripts/load.sh [clients]        (default 64; LOAD_ARGS adds options for the tool;
#        LOAD_SEAWEEDFS=0 measures file:// only)
#        scripts/load.sh history [sessions]   (default 100000)
#        scripts/load.sh fleet [days] [services]   (default 30 and 50: 691,200 pushes)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=run
if [ "${1:-}" = history ] || [ "${1:-}" = fleet ]; then mode=$1; shift; fi
clients=${1:-64} sessions=${1:-100000} days=${1:-30} services=${2:-50}
fixtures=${STACKLENS_FIXTURES:-../shared/fixtures}
weed=${STACKLENS_WEED:-.tools/seaweedfs/bin/weed}

cargo build --release -q -p stacklens-backend --bin stacklens --example load
bin=$PWD/target/release/stacklens
load=$PWD/target/release/examples/load
work=$(mktemp -d /tmp/stacklens-load.XXXXXX)
mkdir -p "$work/dist"
echo '<!doctype html><title>stacklens load</title>' >"$work/dist/index.html"
server_pid='' weed_pid=''

stop() { # pid: SIGTERM, then SIGKILL after 20 s
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() { stop "$server_pid"; stop "$weed_pid"; rm -rf "$work"; }
trap cleanup EXIT

free_port() { # a port nothing answers on
  local p
  for p in $(shuf -i 20000-60000 -n 100); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  echo "no free port" >&2; return 1
}

wait_for() { # what, url...: until each answers 2xx (30 s)
  local what=$1; shift
  for _ in $(seq 300); do
    local all=1 u
    for u in "$@"; do curl -fs -o /dev/null "$u" || { all=0; break; }; done
    [ $all = 1 ] && return 0
    sleep 0.1
  done
  echo "$what did not start" >&2; return 1
}

# store, label, json: a fresh server over the store, the load tool, the server stopped.
measure() {
  local store=$1 label=$2 out=$3 port
  port=$(free_port)
  local compact=()
  [ "$mode" = fleet ] && compact=(--compact-tick-ms 2000)
  RUST_LOG=warn "$bin" serve --listen "127.0.0.1:$port" --dist "$work/dist" --store "$store" "${compact[@]}" \
    >"$work/server-$port.log" 2>&1 &
  server_pid=$!
  wait_for "stacklens serve" "http://127.0.0.1:$port/healthz"
  # shellcheck disable=SC2086 # LOAD_ARGS is a list of options
  local what=(run --fixtures "$fixtures" --clients "$clients")
  [ "$mode" = history ] && what=(history --sessions "$sessions")
  [ "$mode" = fleet ] && what=(fleet --days "$days" --services "$services")
  "$load" "${what[@]}" --url "http://127.0.0.1:$port" \
    --server-pid "$server_pid" ${weed_pid:+--store-pid "$weed_pid"} --label "$label" --json "$out" ${LOAD_ARGS:-} >&2
  stop "$server_pid"
  server_pid=''
  if grep -qiE 'error|panic' "$work/server-$port.log"; then
    echo "server log ($label):" >&2; grep -iE 'error|panic' "$work/server-$port.log" | sort | uniq -c | head -20 >&2
  fi
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
measure "file://$work/store" "file://" "$work/file.json"
if [ "$mode" = fleet ]; then
  # What the blocks take beside the raw pushes they were made from (file:// only).
  sizes() { du -sb "$work"/store/tenants/*/"$1" | awk '{s += $1} END {print s}'; }
  echo "file:// store: raw sessions $(sizes sessions) bytes, time index $(sizes series) bytes, blocks $(sizes blocks) bytes" >&2
fi

reports=("$work/file.json")
if [ -x "$weed" ] && [ "${LOAD_SEAWEEDFS:-1}" = 1 ]; then
  # One SeaweedFS at a time on this machine (fixed ports): the tests take the same lock.
  exec 9>"${TMPDIR:-/tmp}/stacklens-seaweedfs.lock"
  flock -w 600 9
  mkdir -p "$work/weed"
  echo '{"identities":[{"name":"load","credentials":[{"accessKey":"stacklens-load","secretKey":"stacklens-load-secret"}],"actions":["Admin","Read","Write","List","Tagging"]}]}' >"$work/weed/s3.json"
  "$weed" mini -dir="$work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.port=8333 \
    -s3.config="$work/weed/s3.json" -bucket=test -webdav=false -admin.ui=false \
    -s3.port.iceberg=0 -s3.port.lance=0 -master.telemetry=false >/dev/null 2>"$work/weed/weed.log" &
  weed_pid=$!
  wait_for SeaweedFS http://127.0.0.1:8333/healthz http://127.0.0.1:8888/buckets/test/
  AWS_ACCESS_KEY_ID=stacklens-load AWS_SECRET_ACCESS_KEY=stacklens-load-secret AWS_REGION=us-east-1 \
    AWS_ENDPOINT=http://127.0.0.1:8333 AWS_ALLOW_HTTP=true \
    measure "s3://test" "SeaweedFS (s3://test)" "$work/s3.json"
  stop "$weed_pid"
  weed_pid=''
  reports+=("$work/s3.json")
else
  echo "SeaweedFS not installed at $weed (scripts/ensure-tools.sh): file:// only" >&2
fi

echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), $(free -g | awk '/Mem:/{print $2}') GiB; stacklens $(git rev-parse --short HEAD); load average before: $load_before; $(date -u +%Y-%m-%d)"
echo
"$load" table "${reports[@]}"

#!/usr/bin/env bash
# How often `stacklens gate` fails unchanged code (its false-positive rate), and whether
# it catches an injected slowdown, on real CPU captures of the Go service of
# backend/tests/goservice:
#
#   1. 2×PAIRS sets of RUNS captures (SECONDS s each) of the unchanged service, one after
#      the other. Every pair of sets gated is unchanged code against itself, so every
#      pair that fails is a false positive; two ways:
#      - one side after the other: set 2k (base) against set 2k+1 (compare), as a CI job
#        that captures the base and then the change (or gates against a stored baseline);
#      - alternated: the same 2×RUNS captures in time order, the 1st, 3rd, … as the base
#        and the 2nd, 4th, … as the compare, as the README advises.
#   2. PAIRS sets of the service with GOSERVICE_SLOW=allocate (main.allocate does extra
#      work); pair k is unchanged set 2k against slow set k. A pair detects the slowdown
#      when the gate fails and main.allocate is its first regression.
#
# Usage: scripts/gate-fpr.sh [PAIRS [RUNS [SECONDS]]]   (default 20 3 2; about 6 minutes)
# The binary is $STACKLENS, else target/release/stacklens, else target/debug/stacklens;
# GATE_ARGS are passed to every gate (--config FILE, …). The captures stay in the folder
# printed at the end; CAPTURES=that-folder gates them again without capturing.
set -euo pipefail
cd "$(dirname "$0")/.."

pairs=${1:-20}
runs=${2:-3}
seconds=${3:-2}
stacklens=${STACKLENS:-}
if [ -z "$stacklens" ]; then
  for candidate in target/release/stacklens target/debug/stacklens; do
    if [ -x "$candidate" ]; then stacklens=$candidate; break; fi
  done
fi
if [ -z "$stacklens" ]; then
  echo "no stacklens binary: cargo build --release -p stacklens-backend, or set STACKLENS" >&2
  exit 2
fi
read -r -a gate_args <<<"${GATE_ARGS:-}"

dir=${CAPTURES:-}
if [ -z "$dir" ]; then
  dir=$(mktemp -d -t stacklens-gate-fpr.XXXXXX)
  GOCACHE="$dir/gocache" GO111MODULE=off go build -o "$dir/goservice" backend/tests/goservice/main.go
fi

services=()
stop_services() {
  for pid in "${services[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_services EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_service PORT [ENV=VALUE…]: the service, once /ready answers 200.
start_service() {
  local port=$1; shift
  env "$@" "$dir/goservice" "127.0.0.1:$port" >/dev/null &
  services+=($!)
  for _ in $(seq 600); do
    if curl -sf -o /dev/null "http://127.0.0.1:$port/ready"; then return; fi
    sleep 0.1
  done
  echo "the Go service on port $port did not get ready" >&2
  exit 1
}

# capture_sets PORT NAME COUNT: COUNT sets of $runs captures, NAME-SET-RUN.pb.gz.
capture_sets() {
  local port=$1 name=$2 count=$3
  for set in $(seq 0 $((count - 1))); do
    for run in $(seq 0 $((runs - 1))); do
      curl -sf -o "$dir/$name-$set-$run.pb.gz" "http://127.0.0.1:$port/debug/pprof/profile?seconds=$seconds"
    done
  done
}

files() { # files NAME SET
  for run in $(seq 0 $((runs - 1))); do printf '%s\n' "$dir/$1-$2-$run.pb.gz"; done
}

# gate BASE… -- COMPARE…: the gate's exit status; its text in $dir/last.txt.
gate() {
  local status=0 base=()
  while [ "$1" != -- ]; do base+=("$1"); shift; done
  shift
  "$stacklens" gate --base "${base[@]}" --compare "$@" "${gate_args[@]}" >"$dir/last.txt" 2>&1 || status=$?
  return "$status"
}

started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
if [ -z "${CAPTURES:-}" ]; then
  echo "capturing $((2 * pairs)) sets of $runs × ${seconds}s from the unchanged service…"
  port=$(free_port)
  start_service "$port"
  capture_sets "$port" unchanged $((2 * pairs))
  stop_services
  services=()

  echo "capturing $pairs sets from the service with GOSERVICE_SLOW=allocate…"
  port=$(free_port)
  start_service "$port" GOSERVICE_SLOW=allocate
  capture_sets "$port" slow "$pairs"
  stop_services
  services=()
fi

# same_code PROTOCOL K BASE… -- COMPARE…: gates a same-code pair, counting a failure.
same_code() {
  local protocol=$1 k=$2 status=0
  shift 2
  gate "$@" || status=$?
  case $status in
    0) ;;
    1) failed[$protocol]=$((${failed[$protocol]:-0} + 1))
       echo "same-code pair $k ($protocol) failed:"; grep -A3 '^Regressions' "$dir/last.txt" | sed 's/^/    /' ;;
    *) echo "same-code pair $k: the gate could not run (exit $status):"; cat "$dir/last.txt"; exit 1 ;;
  esac
}

declare -A failed=([sequential]=0 [alternated]=0)
for k in $(seq 0 $((pairs - 1))); do
  mapfile -t first < <(files unchanged $((2 * k)))
  mapfile -t second < <(files unchanged $((2 * k + 1)))
  same_code sequential "$k" "${first[@]}" -- "${second[@]}"
  in_order=("${first[@]}" "${second[@]}")
  odd=() even=()
  for i in "${!in_order[@]}"; do
    if ((i % 2 == 0)); then even+=("${in_order[$i]}"); else odd+=("${in_order[$i]}"); fi
  done
  same_code alternated "$k" "${even[@]}" -- "${odd[@]}"
done

detected=0
for k in $(seq 0 $((pairs - 1))); do
  status=0
  mapfile -t base < <(files unchanged $((2 * k)))
  mapfile -t slow < <(files slow "$k")
  gate "${base[@]}" -- "${slow[@]}" || status=$?
  first=$(grep -A1 '^Regressions' "$dir/last.txt" | sed -n 2p | awk '{print $2}')
  if [ "$status" = 1 ] && [ "$first" = main.allocate ]; then
    detected=$((detected + 1))
  else
    echo "slowdown pair $k: exit $status, first regression '${first:-none}'"
  fi
done

echo
echo "stacklens gate ${gate_args[*]:-(defaults)}, $runs runs of ${seconds}s a side, $(nproc) CPUs, started $started"
echo "same-code pairs failed (false positives), one side after the other: ${failed[sequential]} of $pairs"
echo "same-code pairs failed (false positives), runs alternated: ${failed[alternated]} of $pairs"
echo "slowdown pairs failed naming main.allocate first: $detected of $pairs"
echo "captures: $dir"

#!/usr/bin/env bash
# How often `stacklens gate` fails unchanged code (its false-positive rate), and how often
# it catches a slowdown of one function, on three workloads of different shapes:
#
#   go      the Go service of backend/tests/goservice (one goroutine burns ~90 % of the
#           CPU, the rest is the runtime, allocation and locks), CPU captures of GO_SECONDS s
#           over net/http/pprof; GOSERVICE_SLOW_PERCENT slows main.allocate;
#   native  scripts/gate-workloads/native.c (ten functions of 1 to 30 %, one of them
#           varying by run) under `perf record -e cpu-clock:u -g`, read as `perf script`
#           text; GATE_SLOW_PERCENT slows compress;
#   python  scripts/gate-workloads/python.py (the same shape) under `py-spy record
#           --function -f raw` (folded stacks, 100 Hz); GATE_SLOW_PERCENT slows compress.
#
# A slowdown of N % is extra work in that one function of N % of the program's CPU time
# (of one function's own time, 5 % or 10 % would stay under the default min_relative).
#
# Method: POOL captures each of the unchanged program, 5 % slower and 10 % slower (the
# native and Python ones in turn, one of each at a time, so the machine's drift falls on
# all three alike; the Go ones a service at a time, as each burns a core). Then, for each
# run count R in RUNS, DRAWS comparisons of each kind, every one gated:
#   - same code: 2R distinct unchanged captures drawn at random, the first R the base:
#     every failure (exit 1) is a false positive;
#   - slowdown: R unchanged against R of the slower program, drawn at random: a detection
#     when the gate fails with the slowed function's flat share among the regressions.
# Caveat: the draws reuse one pool, so they are not independent; a pool with an odd
# capture (a burst of load) repeats it across many draws, and the figures describe this
# pool as much as the program. They also mix captures from the whole capture period, as
# an alternating CI job would, not one side after the other.
#
# Usage: scripts/gate-fpr.sh [WORKLOAD…]   (default: go native python; ~15 min with POOL=40)
# Environment: POOL (40), DRAWS (200), RUNS ("8 10": 10 advised), GO_SECONDS (2: the Go captures'),
# SEED (1: the draws'), GATE_ARGS (passed to every gate: --config FILE, …), CAPTURES (a
# previous run's folder, printed at the end: gate its captures again without capturing).
# The binary is $STACKLENS, else target/release/stacklens, else target/debug/stacklens.
# Needs: go (golang-go), perf (linux-perf) with perf_event_paranoid ≤ 2, a C compiler,
# py-spy (PyPI py-spy; $PYSPY, .tools/pyspy/bin/py-spy or on the PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

pool=${POOL:-40}
draws=${DRAWS:-200}
read -r -a run_counts <<<"${RUNS:-8 10}"
seconds=${GO_SECONDS:-2}
read -r -a gate_args <<<"${GATE_ARGS:-}"
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(go native python)

stacklens=${STACKLENS:-}
if [ -z "$stacklens" ]; then
  for candidate in target/release/stacklens target/debug/stacklens; do
    if [ -x "$candidate" ]; then stacklens=$candidate; break; fi
  done
fi
[ -n "$stacklens" ] || { echo "no stacklens binary: cargo build --release -p stacklens-backend, or set STACKLENS" >&2; exit 2; }

pyspy=${PYSPY:-}
[ -n "$pyspy" ] || pyspy=$(command -v .tools/pyspy/bin/py-spy py-spy 2>/dev/null | head -1 || true)
python=$(python3 -c 'import sys; print(sys.executable)')

missing() { echo "gate-fpr: $1" >&2; exit 2; }
for workload in "${workloads[@]}"; do
  case $workload in
    go) command -v go >/dev/null || missing "go is missing: apt-get install golang-go" ;;
    native)
      command -v perf >/dev/null || missing "perf is missing: apt-get install linux-perf"
      command -v cc >/dev/null || missing "a C compiler is missing: apt-get install gcc" ;;
    python)
      [ -n "$pyspy" ] || missing "py-spy is missing: python3 -m venv .tools/pyspy && .tools/pyspy/bin/pip install py-spy" ;;
    *) echo "usage: scripts/gate-fpr.sh [go|native|python]…" >&2; exit 2 ;;
  esac
done

dir=${CAPTURES:-}
[ -n "$dir" ] || dir=$(mktemp -d -t stacklens-gate-fpr.XXXXXX)
conditions=(unchanged 5 10)

# The Go service, one condition at a time.
services=()
stop_services() { for pid in "${services[@]}"; do kill "$pid" 2>/dev/null || true; done; services=(); }
trap stop_services EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# capture_go: POOL captures of each condition, go-CONDITION-I.pb.gz.
capture_go() {
  GOCACHE="$dir/gocache" GO111MODULE=off go build -o "$dir/goservice" backend/tests/goservice/main.go
  for condition in "${conditions[@]}"; do
    local port percent=0
    [ "$condition" = unchanged ] || percent=$condition
    port=$(free_port)
    GOSERVICE_SLOW_PERCENT=$percent "$dir/goservice" "127.0.0.1:$port" >/dev/null &
    services+=($!)
    for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$port/ready" && break; sleep 0.1; done
    for i in $(seq 1 "$pool"); do
      curl -sf -o "$dir/go-$condition-$i.pb.gz" "http://127.0.0.1:$port/debug/pprof/profile?seconds=$seconds"
    done
    stop_services
  done
}

# record WORKLOAD CONDITION I COMMAND…: one run of a native or Python workload, profiled.
record() {
  local workload=$1 condition=$2 i=$3 percent=0
  shift 3
  [ "$condition" = unchanged ] || percent=$condition
  local out="$dir/$workload-$condition-$i"
  case $workload in
    native)
      GATE_SLOW_PERCENT=$percent perf record -q -e cpu-clock:u -g -o "$out.data" "$@" >/dev/null 2>&1
      perf script -i "$out.data" >"$out.perf" 2>/dev/null
      rm "$out.data" ;;
    python)
      GATE_SLOW_PERCENT=$percent "$pyspy" record --function -f raw -o "$out.folded" -- "$@" >/dev/null 2>&1 ;;
  esac
}

capture_in_turn() { # capture_in_turn WORKLOAD COMMAND…
  local workload=$1
  shift
  for i in $(seq 1 "$pool"); do
    for condition in "${conditions[@]}"; do record "$workload" "$condition" "$i" "$@"; done
  done
}

capture() {
  case $1 in
    go) capture_go ;;
    native)
      cc -O2 -fno-omit-frame-pointer -fno-shrink-wrap -fno-optimize-sibling-calls -fno-inline -fno-ipa-icf -fno-ipa-cp \
        -o "$dir/native" scripts/gate-workloads/native.c
      capture_in_turn native "$dir/native" ;;
    python) capture_in_turn python "$python" -S scripts/gate-workloads/python.py ;;
  esac
}

slowed_function() {
  case $1 in go) echo 'main\.allocate' ;; *) echo compress ;; esac
}

# draw N FILE…: N of the files, distinct, at random, into $drawn (bash's RANDOM, seeded
# below; not in a subshell, which would not advance it).
draw() {
  local n=$1
  shift
  local files=("$@") i j t
  for ((i = 0; i < n; i++)); do
    j=$((i + RANDOM % (${#files[@]} - i)))
    t=${files[$i]}; files[$i]=${files[$j]}; files[$j]=$t
  done
  drawn=("${files[@]:0:$n}")
}

# gate R BASE… COMPARE…: the gate's exit status; its text in $last (one a process, so
# that runs of this script can gate one folder side by side).
last="$dir/last-$$.txt"
gate() {
  local r=$1 status=0
  shift
  "$stacklens" gate --base "${@:1:$r}" --compare "${@:$((r + 1))}" "${gate_args[@]}" >"$last" 2>&1 || status=$?
  case $status in 0 | 1 | 6) ;; *) echo "the gate could not run (exit $status):" >&2; cat "$last" >&2; exit 1 ;; esac
  return "$status"
}

summary=()
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for workload in "${workloads[@]}"; do
  if [ -z "${CAPTURES:-}" ]; then
    echo "capturing $workload: $pool runs each of ${conditions[*]} (% slower)…"
    capture "$workload"
  fi
  function=$(slowed_function "$workload")
  unchanged=("$dir/$workload-unchanged-"*)
  for runs in "${run_counts[@]}"; do
    RANDOM=${SEED:-1}
    declare -A count=()
    for _ in $(seq 1 "$draws"); do
      status=0
      draw $((2 * runs)) "${unchanged[@]}"
      gate "$runs" "${drawn[@]}" || status=$?
      count[same-$status]=$((${count[same-$status]:-0} + 1))
      if [ "$status" = 1 ]; then
        echo "$workload, $runs runs: same code failed:"; sed -n '/^Regressions/,/^$/p' "$last" | sed 's/^/    /'
      fi
      for percent in 5 10; do
        draw "$runs" "${unchanged[@]}"
        base=("${drawn[@]}")
        draw "$runs" "$dir/$workload-$percent-"*
        status=0
        gate "$runs" "${base[@]}" "${drawn[@]}" || status=$?
        if [ "$status" = 1 ] && sed -n '/^Regressions/,/^$/p' "$last" | grep -Eq "^  function $function +flat "; then
          count[detected-$percent]=$((${count[detected-$percent]:-0} + 1))
        fi
        count[slow-$percent-$status]=$((${count[slow-$percent-$status]:-0} + 1))
      done
    done
    line="$workload, $runs runs a side: same code failed ${count[same-1]:-0} of $draws (inconclusive ${count[same-6]:-0}, passed ${count[same-0]:-0});"
    line+=" 5 % slower detected ${count[detected-5]:-0} of $draws (inconclusive ${count[slow-5-6]:-0});"
    line+=" 10 % slower detected ${count[detected-10]:-0} of $draws (inconclusive ${count[slow-10-6]:-0})"
    summary+=("$line")
    echo "$line"
    unset count
  done
done

echo
echo "stacklens gate ${gate_args[*]:-(defaults)}, $(nproc) CPUs, commit $(git rev-parse --short HEAD), started $started"
echo "pool $pool captures a condition, $draws draws a comparison, seed ${SEED:-1}; Go captures of ${seconds}s"
printf '%s\n' "${summary[@]}"
echo "captures: $dir"

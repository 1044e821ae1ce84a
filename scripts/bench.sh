#!/usr/bin/env bash
# Benchmarks stacklens against `go tool pprof` on the benchmark-size fixtures, in one
# run on this machine: wall time and peak RSS (median of N runs) for the same work.
# Usage: scripts/bench.sh [runs]   (prints a Markdown table for BENCHMARKS.md)
# The criterion micro-benchmarks are separate: cargo bench -p stacklens-core --bench large
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
fixtures=${STACKLENS_FIXTURES:-../shared/fixtures}
large=$fixtures/large
command -v go >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null; }
cargo build --release -q -p stacklens-backend
bin=./target/release/stacklens
timing=$(mktemp)
trap 'rm -f "$timing"' EXIT

# median wall seconds and median max-RSS MB over $runs runs of "$@"
measure() {
  local walls=() rss=()
  for _ in $(seq "$runs"); do
    local out
    /usr/bin/time -f '%e %M' -o "$timing" "$@" >/dev/null 2>&1
    out=$(tail -1 "$timing")
    walls+=("${out% *}"); rss+=("${out#* }")
  done
  local w r
  w=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
  r=$(printf '%s\n' "${rss[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
  printf '%s %s' "$w" "$(( r / 1024 ))"
}

row() { # label, then the command
  local label=$1; shift
  read -r w m <<<"$(measure "$@")"
  printf '| %s | %s s | %s MB |\n' "$label" "$w" "$m"
}

echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), $(free -g | awk '/Mem:/{print $2}') GiB; $(go version | cut -d' ' -f3); stacklens $(git rev-parse --short HEAD); median of $runs runs"
echo
echo "| work | wall | peak RSS |"
echo "| --- | --- | --- |"
export PPROF_BINARY_PATH=/nonexistent
row "go tool pprof -symbolize=none -top -nodecount=20 cpu.large.pb.gz" go tool pprof -symbolize=none -top -nodecount=20 "$large/cpu.large.pb.gz"
row "stacklens top cpu.large.pb.gz --nodecount 20 --nodefraction 0.005" $bin top "$large/cpu.large.pb.gz" --nodecount 20 --nodefraction 0.005
row "stacklens top cpu.large.pb.gz --format json (all 634 functions)" $bin top "$large/cpu.large.pb.gz" --format json
row "go tool pprof -top goroutine.large.pb.gz" go tool pprof -symbolize=none -top -nodecount=20 "$large/goroutine.large.pb.gz"
row "stacklens goroutines goroutine.large.debug2.txt (52,004 goroutines)" $bin goroutines "$large/goroutine.large.debug2.txt"
row "stacklens top goroutine.large.debug2.txt" $bin top "$large/goroutine.large.debug2.txt" --nodecount 20

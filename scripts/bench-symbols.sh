#!/usr/bin/env bash
# Symbolizes the same 1,000,000 addresses (random, inside the functions of the binary's
# symbol table; seeded, so every run draws the same; distinct and in address order, as a
# profile's locations are looked up) against one large binary with full
# DWARF with stacklens (core's ObjectFile, `cargo bench --bench symbols`),
# llvm-symbolizer and binutils addr2line, one after the other, and prints each time.
# usage: [RUNS=7] scripts/bench-symbols.sh [BINARY] [COUNT] [ADDR2LINE_COUNT]
#   BINARY: default target/debug/stacklens (about 85 MB, debug build); COUNT 1000000.
#   binutils addr2line takes about 1.3 ms an address here (22 min for 1 M): it gets the
#   first ADDR2LINE_COUNT addresses (default all) and its time is scaled to COUNT.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/debug/stacklens}; COUNT=${2:-1000000}; A2L_COUNT=${3:-$COUNT}; RUNS=${RUNS:-7}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
cp "$BIN" "$TMP/binary"   # a rebuild during the run must not change what is read
ls -l "$TMP/binary" | awk '{printf "binary: %s, %d MB\n", "'"$BIN"'", $5 / 1e6}'
nm -S --defined-only "$TMP/binary" | awk '$3 ~ /^[tT]$/ && $2 != "" {print $1, $2}' > "$TMP/functions"
python3 - "$TMP/functions" "$COUNT" > "$TMP/addresses" <<'PY'
import random, sys
funcs = [tuple(int(x, 16) for x in line.split()) for line in open(sys.argv[1])]
funcs = [(a, s) for a, s in funcs if s > 0]
rng = random.Random(34)
want, drawn = int(sys.argv[2]), set()
while len(drawn) < want:
    a, s = rng.choice(funcs)
    drawn.add(a + rng.randrange(s))
for address in sorted(drawn):
    print("0x%x" % address)
PY
echo "addresses: $(wc -l < "$TMP/addresses")"
cargo bench -q -p stacklens-core --bench symbols --no-run 2>/dev/null
# CPU seconds (user + sys) as well as wall: the machine may be shared.
time_of() { /usr/bin/time -f "%e s wall, %U s user + %S s sys" "$@" 2>&1 >/dev/null | tail -1; }
bench=$(ls -t target/release/deps/symbols-* | grep -v '\.d$' | head -1)
# The two fast tools alternate RUNS times (the machine's speed drifts); then medians.
wall() { /usr/bin/time -f "%e" "$@" 2>&1 >/dev/null | tail -1; }
ours=() llvm=()
for run in $(seq "$RUNS"); do
  ours+=("$(STACKLENS_BENCH_BINARY="$TMP/binary" STACKLENS_BENCH_ADDRESSES="$TMP/addresses" wall "$bench")")
  llvm+=("$(wall llvm-symbolizer --obj="$TMP/binary" --functions=linkage --inlines --no-demangle < "$TMP/addresses")")
  echo "run $run: stacklens ${ours[-1]} s, llvm-symbolizer ${llvm[-1]} s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
m_ours=$(median "${ours[@]}") m_llvm=$(median "${llvm[@]}")
echo "stacklens: median $m_ours s wall; $(STACKLENS_BENCH_BINARY="$TMP/binary" STACKLENS_BENCH_ADDRESSES="$TMP/addresses" time_of "$bench")"
echo "llvm-symbolizer $(llvm-symbolizer --version | awk '/version/ {print $NF; exit}'): median $m_llvm s wall"
awk -v a="$m_llvm" -v b="$m_ours" 'BEGIN {printf "llvm-symbolizer / stacklens (medians): %.1fx\n", a / b}'
head -n "$A2L_COUNT" "$TMP/addresses" > "$TMP/addresses.a2l"
echo "addr2line $(addr2line --version | head -1 | awk '{print $NF}') on the first $A2L_COUNT: $(time_of \
  addr2line -f -i -e "$TMP/binary" < "$TMP/addresses.a2l")"

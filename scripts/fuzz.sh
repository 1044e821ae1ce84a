#!/usr/bin/env bash
# Fuzzes stacklens-core with cargo fuzz (libFuzzer; needs nightly, installed if
# missing, as is cargo-fuzz): every target one after another for SECONDS each, then a
# table of executions and exec/s per target. Corpora are seeded at run time from the
# shared fixtures (../shared/fixtures, or $STACKLENS_FIXTURES) into core/fuzz/corpus/,
# which is not committed. See FUZZING.md.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: 60 s, every target
#
# Environment: FUZZ_RUNS (stop a target after this many executions as well),
# FUZZ_MAX_LEN (default 8192), FUZZ_RSS_LIMIT_MB (2048), FUZZ_TIMEOUT (10 s per input).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TERM_COLOR=never

per_target=${1:-60}
shift || true
max_len=${FUZZ_MAX_LEN:-8192}
rss_limit=${FUZZ_RSS_LIMIT_MB:-2048}
timeout=${FUZZ_TIMEOUT:-10}
fixtures=${STACKLENS_FIXTURES:-../shared/fixtures}
fuzz=core/fuzz
all_targets=(parse model_limit parse_gzip heap_text contention_text count_text goroutine_dump threadz_text java_heapz_text
  java_contentionz_text legacy_cpu jfr firefox analysis_top call_tree layout diff goroutines tree_bytes symbols_elf symbols_breakpad
  perf_data otlp symbols_go)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all_targets[@]}"); fi

# --- tools -------------------------------------------------------------------------
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

# --- seed corpora ------------------------------------------------------------------
# Each seed is a fixture reshaped to what its target expects (header stripped, option
# prefix added, inflated). Names are fixed, so re-running refreshes rather than piles up.
# Readers cut short by `head` die of SIGPIPE here, which is fine: no pipefail.
set +o pipefail
prefix_zeros() { head -c 64 /dev/zero; } # the analysis targets' option bytes (fuzz/src/lib.rs PREFIX)
le32() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 24 & 255)))"; }
le64() { le32 "$1"; le32 0; }
is_gzip() { [ "$(head -c 2 "$1" | od -An -tx1 | tr -d ' \n')" = "1f8b" ]; }
plain() { if is_gzip "$1"; then gzip -dc "$1" 2>/dev/null || true; else cat "$1"; fi; }
first_line() { plain "$1" | head -n 1 | tr -d '\r\0'; }
seed() { # target name: stdin becomes corpus/<target>/seed-<name>
  local dir=$fuzz/corpus/$1 name=${2//\//_}
  mkdir -p "$dir"
  head -c "$max_len" >"$dir/seed-$name"
  [ -s "$dir/seed-$name" ] || rm -f "$dir/seed-$name"
}

profiles=()
if [ -f "$fixtures/SOURCES.md" ]; then
  while IFS= read -r f; do profiles+=("$f"); done < <(
    cd "$fixtures" && find go large thirdparty tools -type f ! -name '*.pprof-top.txt' ! -name '*.pprof-error.txt' \
      ! -name '*.string' | sort
  )
else
  echo "fixtures not found at $fixtures (set STACKLENS_FIXTURES); fuzzing from the small built-in seeds only" >&2
fi
for rel in "${profiles[@]}"; do
  f=$fixtures/$rel
  # Seeds are cut to max_len (libFuzzer would cut them too); the multi-megabyte
  # benchmark inputs are left out, reading them would only slow seeding down.
  [ "$(plain "$f" | wc -c)" -le $((4 << 20)) ] || continue
  seed parse "$rel" <"$f"
  { printf '\x00\x01'; cat "$f"; } | seed model_limit "$rel" # a limit of 256 KiB
  { printf '\0'; plain "$f"; } | seed parse_gzip "$rel"
  for t in analysis_top call_tree layout goroutines; do { prefix_zeros; plain "$f"; } | seed $t "$rel"; done
  line=$(first_line "$f")
  case "$line" in
    "heap profile:"*) plain "$f" | tail -c +15 | seed heap_text "$rel" ;;
    "--- contention"* | "--- mutex:"*) plain "$f" | tail -n +2 | seed contention_text "$rel" ;;
    "--- threadz"*) plain "$f" | tail -n +2 | seed threadz_text "$rel" ;;
    "goroutine "*" ["*) plain "$f" | tail -n +2 | seed goroutine_dump "$rel" ;;
  esac
  if [[ $line =~ ^[A-Za-z_0-9]+\ profile:\ total\ [0-9]+$ ]]; then plain "$f" | tail -n +2 | seed count_text "$rel"; fi
  # Legacy binary CPU, 64-bit little-endian C++ (mode byte 2): drop the 40-byte header.
  if [ "$(head -c 16 "$f" | od -An -tx1 | tr -d ' \n')" = "00000000000000000300000000000000" ]; then
    { printf '\x02'; tail -c +41 "$f"; } | seed legacy_cpu "$rel"
  fi
  if [ "$(plain "$f" | head -c 1 | tr -d '\0')" = "{" ]; then plain "$f" | seed firefox "$rel"; fi
  # JFR: the target writes the chunk header; the seed is its features byte, the metadata
  # offset in the body (little-endian) and the body after the 68-byte header.
  if [ "$(plain "$f" | head -c 4 | od -An -tx1 | tr -d ' \n')" = "464c5200" ]; then
    metadata=$(plain "$f" | head -c 32 | tail -c 8 | od -An -tu8 --endian=big | tr -d ' ')
    features=$(plain "$f" | head -c 68 | tail -c 1 | od -An -tu1 | tr -d ' ')
    { printf "\\x$(printf %02x "$features")"; le32 $((metadata - 68)); plain "$f" | tail -c +69; } | seed jfr "$rel"
  fi
done
# Binaries and debug files for the symbol reader and Breakpad .sym files for theirs,
# after an address inside their code, and perf.data recordings: what tests/programs/make.sh made.
symbols=${STACKLENS_SYMBOL_FIXTURES:-target/fixtures/symbols}
for f in "$symbols"/bin/*; do
  [ -f "$f" ] || continue
  { le64 4688; cat "$f"; } | seed symbols_elf "symbols/bin/$(basename "$f")"
done
for f in "$symbols"/sym/*.sym; do
  [ -f "$f" ] || continue
  { le64 4688; cat "$f"; } | seed symbols_breakpad "symbols/sym/$(basename "$f")"
done
# The Go programs' ELF pclntabs, after a pc offset into their code.
for f in "$symbols"/bin/symwork-go*; do
  objcopy -O binary --only-section=.gopclntab "$f" "$fuzz/pclntab.tmp" 2>/dev/null || continue
  [ -s "$fuzz/pclntab.tmp" ] && { le64 $((0x50000)); cat "$fuzz/pclntab.tmp"; } | seed symbols_go "$(basename "$f")"
done
rm -f "$fuzz/pclntab.tmp"
for f in "$symbols"/*.perf.data; do
  [ -f "$f" ] || continue
  seed perf_data "symbols/$(basename "$f")" <"$f"
done
# OTLP profiles: the eBPF profiler's export, and Go profiles converted by the official
# classes (when .tools/otlp is installed).
seed otlp "thirdparty/pyroscope/otel-ebpf-profile.pb.bin" <"$fixtures/thirdparty/pyroscope/otel-ebpf-profile.pb.bin"
if [ -x .tools/otlp/bin/python ]; then
  otlp_tmp=$(mktemp -d)
  for kind in cpu heap goroutine; do
    .tools/otlp/bin/python tests/programs/otlp.py from-pprof "$fixtures/go/base/$kind.pb.gz" "$otlp_tmp/$kind" fuzz
    seed otlp "otlp/$kind.pb" <"$otlp_tmp/$kind.pb"
  done
  rm -rf "$otlp_tmp"
fi
# Before/after pairs for diff: go/base/X against go/compare/X.
for base in "${profiles[@]}"; do
  [[ $base == go/base/* ]] || continue
  compare=go/compare/${base#go/base/}
  [ -f "$fixtures/$compare" ] || continue
  a=$(plain "$fixtures/$base" | wc -c)
  b=$(plain "$fixtures/$compare" | wc -c)
  [ $((a + b + 68)) -le "$max_len" ] || continue
  { prefix_zeros; le32 "$a"; plain "$fixtures/$base"; plain "$fixtures/$compare"; } | seed diff "$base"
done
# Formats with no fixture: small seeds of our own, in the shape the importers document.
printf 'format = java\nresolution = bytes\n  524288 2 @ 0x00000003 0x00000004\n  1000 10 @ 0x00000004\n0x00000003 com.example.Cache.put (Cache.java:42)\n0x00000004 java.lang.Thread.run (Thread.java:745)\n' |
  seed java_heapz_text own-heapz
printf 'resolution = microseconds\nsampling period = 100\nms since reset = 6019923\n  2000 3 @ 0x00000001\n0x00000001 java.lang.Object.wait (Native Method)\n' |
  seed java_contentionz_text own-contentionz
{ printf '\x06'; for w in 5 2 17 18 7 1 18 0 1 0; do le64 $w; done; printf '0x0000000000000011 com.example.Work.hot (Work.java:7)\n0x0000000000000012 GC\n'; } |
  seed legacy_cpu own-java
printf '%s' '{"meta": {"interval": 1}, "libs": [{"name": "busy", "debugName": "busy"}], "threads": [{"name": "t", "stringArray": ["0x120", "0x900", "busy"], "funcTable": {"name": [0, 1], "resource": [0, 0], "fileName": [null, null]}, "frameTable": {"func": [0, 1], "address": [288, 2304]}, "resourceTable": {"lib": [0], "name": [2]}, "stackTable": {"frame": [1, 0], "prefix": [null, 0]}, "samples": {"stack": [1, 1, 0]}}], "syms": {"string_table": ["main.hot", "/src/busy.go"], "data": [{"debug_name": "busy", "symbol_table": [{"rva": 256, "size": 64, "symbol": 0, "frames": [{"file": 1, "line": 7}]}]}]}}' |
  seed firefox own-samply-syms
for t in "${targets[@]}"; do mkdir -p "$fuzz/corpus/$t"; done
set -o pipefail

# --- run ---------------------------------------------------------------------------
# Safe Rust only (no `unsafe` in core), so no AddressSanitizer: bounds, overflow (debug
# assertions are on) and allocation failures are caught by Rust itself, at 2-3x the speed.
(cd core && cargo +nightly fuzz build -s none)
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
failed=0
for t in "${targets[@]}"; do
  log=$fuzz/artifacts/$t.log
  mkdir -p "$fuzz/artifacts/$t"
  dict=$PWD/$fuzz/dicts/$t.dict
  [ -f "$dict" ] || dict=$PWD/$fuzz/dicts/common.dict
  printf '\n=== %s (%ss)\n' "$t" "$per_target"
  status=ok
  (cd core && cargo +nightly fuzz run -s none "$t" -- -max_total_time="$per_target" ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} \
    -rss_limit_mb="$rss_limit" -max_len="$max_len" -timeout="$timeout" -print_final_stats=1 -dict="$dict") \
    >"$log" 2>&1 || status=FAILED
  grep -E '^(Done|stat::|==[0-9]+== ERROR|SUMMARY|thread .* panicked|artifact_prefix|Test unit written)' "$log" || true
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  # A target that stopped on a finding prints no "Done" line.
  if [ -z "$secs" ] && [ -n "$runs" ] && [ "${rate:-0}" -gt 0 ]; then secs="~$((runs / rate))"; fi
  [ "$status" = ok ] || failed=1
  printf '| %s | %s | %s | %s | %s |\n' "$t" "${runs:-?}" "${secs:-?}" "${rate:-?}" "$status" >>"$summary"
done
printf '\n| target | executions | seconds | exec/s | result |\n| --- | ---: | ---: | ---: | --- |\n'
cat "$summary"
printf '\nlogs: %s/artifacts/<target>.log; crashing inputs: %s/artifacts/<target>/\n' "$fuzz" "$fuzz"
exit $failed

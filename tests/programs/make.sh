#!/usr/bin/env bash
# Makes the symbolization and perf.data fixtures from the programs beside this script,
# with the compilers and profilers of this machine, into OUT (default
# target/fixtures/symbols). The tests compare stacklens with the reference tools run on
# these very files (addr2line, llvm-symbolizer, perf report, go tool pprof), so they are
# made where they run rather than kept. Re-running with the same sources and tools does
# nothing (OUT/.made holds their hash).
#
# OUT/bin/NAME            the program as built: -O2 with DWARF and frame pointers (so that
#                         perf -g walks whole stacks), symbols kept
# OUT/bin/NAME.stripped   the same, strip --strip-all, with a .gnu_debuglink to NAME.debug
# OUT/bin/NAME.debug      objcopy --only-keep-debug of NAME
# OUT/debug/.build-id/ab/cdef….debug   the debug files by GNU build id (as debuginfod and
#                         perf lay them out)
#   NAME: symwork-c (PIE), symwork-c-nopie (fixed address, compressed DWARF: -gz),
#   symwork-cpp, symwork-rust (legacy mangling), symwork-rust-v0 (v0 mangling),
#   symwork-go; and symwork-go-s (go build -ldflags="-s -w": only .gopclntab names it).
# OUT/bin/symwork-go-darwin, symwork-go-darwin-s   the Go program as a macOS amd64 Mach-O
#                         (GOOS=darwin), with DWARF and with -ldflags="-s -w"; not run
# OUT/NAME.perf.data      perf record -g -e cpu-clock:u of bin/NAME.stripped (symwork-go-s:
#                         of the binary itself), about a second
# OUT/NAME.perf-script.txt  perf script of it, run with the debug files out of perf's reach:
#                         what a stripped production binary's profile looks like
#                         (its frames `[unknown]`); perf report at test time finds them
# OUT/symwork-cpp.events.perf.data (+ .perf-script.txt)  two events: cpu-clock:u and
#                         page-faults:u
# OUT/symwork-c.pipe.perf.data (+ .perf-script.txt)  perf.data in pipe mode: `perf record
#                         -o -` through `perf inject -b` (which adds build ids as records)
# OUT/symwork-c.zstd.perf.data (+ .perf-script.txt)  perf record -z: records compressed
#                         with zstd; symwork-c.zstd-long: 3 s at -F 9999, so that the
#                         stream outgrows zstd's window; symwork-c.zstd-pipe: in pipe mode
# OUT/kernel.perf.data (+ .perf-script.txt), OUT/kallsyms   dd copying /dev/zero, recorded
#                         with its kernel frames (perf record -g -e cpu-clock), and
#                         /proc/kallsyms copied in the same boot; made only where the kernel
#                         lets perf sample it and shows kallsyms' addresses (root, or
#                         perf_event_paranoid <= 1 and kptr_restrict 0): OUT/kernel.absent
#                         says why not
# OUT/symwork-c.gperftools.prof  gperftools' CPU profile (libprofiler) of symwork-c.stripped
# OUT/sym/NAME.sym        Breakpad symbol file of bin/NAME, by Mozilla's dump_syms --inlines
#                         (symwork-c, symwork-cpp, symwork-rust)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../target/fixtures/symbols}
mkdir -p "$out"
out=$(cd "$out" && pwd)

versions() { gcc --version | head -1; g++ --version | head -1; rustc --version; go version; perf --version; objcopy --version | head -1; dump_syms --version 2>/dev/null || true; }
hash=$( { cat "$here"/make.sh "$here"/symwork.*; versions; } | sha256sum | cut -d' ' -f1)
if [ -f "$out/.made" ] && [ "$(cat "$out/.made")" = "$hash" ]; then
  echo "symbol fixtures in $out are up to date"
  exit 0
fi
rm -rf "$out"/bin "$out"/debug "$out"/sym "$out"/*.perf.data "$out"/*.perf-script.txt "$out"/*.prof "$out/.made" \
  "$out"/kallsyms "$out"/kernel.absent
mkdir -p "$out/bin" "$out/debug" "$out/sym"
cd "$out/bin"

gcc -O2 -g -fno-omit-frame-pointer -o symwork-c "$here/symwork.c"
gcc -O2 -g -fno-omit-frame-pointer -gz -no-pie -o symwork-c-nopie "$here/symwork.c"
g++ -O2 -g -fno-omit-frame-pointer -o symwork-cpp "$here/symwork.cpp"
rustc --edition 2021 -O -g -C force-frame-pointers=yes -o symwork-rust "$here/symwork.rs"
rustc --edition 2021 -O -g -C force-frame-pointers=yes -C symbol-mangling-version=v0 -o symwork-rust-v0 "$here/symwork.rs"
(cd "$here" && GO111MODULE=off go build -o "$out/bin/symwork-go" symwork.go)
(cd "$here" && GO111MODULE=off go build -ldflags="-s -w" -o "$out/bin/symwork-go-s" symwork.go)
# Mach-O, cross-compiled (Go needs no SDK for it): named by DWARF, and stripped by pclntab.
(cd "$here" && GO111MODULE=off GOOS=darwin GOARCH=amd64 go build -o "$out/bin/symwork-go-darwin" symwork.go)
(cd "$here" && GO111MODULE=off GOOS=darwin GOARCH=amd64 go build -ldflags="-s -w" -o "$out/bin/symwork-go-darwin-s" symwork.go)

programs=(symwork-c symwork-c-nopie symwork-cpp symwork-rust symwork-rust-v0 symwork-go)
for p in "${programs[@]}"; do
  objcopy --only-keep-debug "$p" "$p.debug"
  objcopy --strip-all --add-gnu-debuglink="$p.debug" "$p" "$p.stripped"
  id=$(readelf -n "$p" | sed -n 's/^ *Build ID: *//p')
  if [ -n "$id" ]; then
    mkdir -p "../debug/.build-id/${id:0:2}"
    cp "$p.debug" "../debug/.build-id/${id:0:2}/${id:2}.debug"
  fi
done

# Rounds that make about a second of work each on a machine of this kind.
declare -A rounds=([symwork-c]=200 [symwork-c-nopie]=200 [symwork-cpp]=80 [symwork-rust]=300
  [symwork-rust-v0]=300 [symwork-go]=120 [symwork-go-s]=120)
cd "$out"
hidden=$(mktemp -d)
trap 'mv "$hidden"/*.debug "$out/bin/" 2>/dev/null || true; rm -rf "$hidden"' EXIT
mv bin/*.debug "$hidden/"
record() { # NAME EVENTS BINARY ROUNDS
  perf record --quiet --no-buildid-cache -g -F 999 -e "$2" -o "$1.perf.data" -- "$3" "$4" >/dev/null
  perf script -i "$1.perf.data" >"$1.perf-script.txt" 2>/dev/null
}
for p in "${programs[@]}"; do
  record "$p" cpu-clock:u "$out/bin/$p.stripped" "${rounds[$p]}"
done
record symwork-go-s cpu-clock:u "$out/bin/symwork-go-s" "${rounds[symwork-go-s]}"
record symwork-cpp.events cpu-clock:u,page-faults:u "$out/bin/symwork-cpp.stripped" 20
perf record --quiet --no-buildid-cache -g -F 999 -e cpu-clock:u -o - -- "$out/bin/symwork-c.stripped" 200 \
  2>/dev/null | perf inject -b >symwork-c.pipe.perf.data
perf script -i symwork-c.pipe.perf.data >symwork-c.pipe.perf-script.txt 2>/dev/null
# perf record -z: small; long enough (about 2.5 MB of records at -F 9999) that the zstd
# stream outgrows its window; and into a pipe.
perf record --quiet --no-buildid-cache -z -g -e cpu-clock:u -o symwork-c.zstd.perf.data -- \
  "$out/bin/symwork-c.stripped" 20 >/dev/null
perf record --quiet --no-buildid-cache -z -g -F 9999 -e cpu-clock:u -o symwork-c.zstd-long.perf.data -- \
  "$out/bin/symwork-c.stripped" 600 >/dev/null
perf record --quiet --no-buildid-cache -z -g -e cpu-clock:u -o - -- "$out/bin/symwork-c.stripped" 20 \
  2>/dev/null >symwork-c.zstd-pipe.perf.data
for z in symwork-c.zstd symwork-c.zstd-long symwork-c.zstd-pipe; do
  perf script -i $z.perf.data >$z.perf-script.txt 2>/dev/null
done

mv "$hidden"/*.debug bin/

rm -f kernel.absent kallsyms
if [ "$(awk 'NR == 1 {print $1; exit}' /proc/kallsyms)" = 0000000000000000 ]; then
  echo "/proc/kallsyms shows no addresses here (kernel.kptr_restrict)" >kernel.absent
elif ! perf record --quiet --no-buildid-cache -g -e cpu-clock -o kernel.perf.data -- \
  dd if=/dev/zero of=/dev/null bs=64k count=200000 2>/dev/null; then
  echo "perf may not sample the kernel here (kernel.perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid), not root)" >kernel.absent
else
  cp /proc/kallsyms kallsyms && chmod 644 kallsyms
  perf script -i kernel.perf.data >kernel.perf-script.txt 2>/dev/null
fi

if ! command -v dump_syms >/dev/null; then
  echo "make.sh: dump_syms not found (cargo install dump_syms, as scripts/ensure-tools.sh does)" >&2
  exit 1
fi
for p in symwork-c symwork-cpp symwork-rust; do
  dump_syms --inlines "bin/$p" >"sym/$p.sym"
done

profiler=$(ls /usr/lib/*/libprofiler.so.0 2>/dev/null | head -1)
if [ -z "$profiler" ]; then
  echo "make.sh: gperftools' libprofiler.so.0 not found (Debian libgoogle-perftools-dev)" >&2
  exit 1
fi
CPUPROFILE="$out/symwork-c.gperftools.prof" CPUPROFILE_FREQUENCY=1000 LD_PRELOAD="$profiler" \
  "$out/bin/symwork-c.stripped" 600 >/dev/null

echo "$hash" >"$out/.made"
echo "symbol fixtures made in $out"

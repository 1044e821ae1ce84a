#!/usr/bin/env bash
# Builds the page and serves it with the API on http://127.0.0.1:8080, storing in ./data.
# Installs only what serving needs (no browser, no test tools), and says how long each
# step takes.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
step() {
  local what=$1 started=$SECONDS
  shift
  printf '[serve] %s\n' "$what"
  "$@"
  printf '[serve]   done in %s s\n' "$((SECONDS - started))"
}
step "tools (trunk, wasm-bindgen, wasm-opt; each installed only when missing)" bash scripts/ensure-tools.sh serve
step "build the page (trunk build --release)" trunk build --release
step "build the server (cargo build --release)" cargo build --release -p stacklens-backend
printf '[serve] serving http://127.0.0.1:8080 (store: ./data; Ctrl-C stops)\n'
exec ./target/release/stacklens serve --listen 127.0.0.1:8080 --dist dist "$@"

#!/usr/bin/env bash
# Builds the page and serves it with the API on http://127.0.0.1:8080, storing in ./data.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
bash scripts/ensure-tools.sh web
trunk build --release
cargo build --release -p stacklens-backend
exec ./target/release/stacklens serve --listen 127.0.0.1:8080 --dist dist "$@"

#!/bin/sh
# Quick start: install build dependencies, build cairn (release), and run `cairn demo`, which
# generates a regtest chain into ~/.cairn/regtest, validates it with Bitcoin Core's kernel and
# keeps serving until Ctrl-C. Extra arguments go to `cairn`, e.g. `--datadir /tmp/cairn`.
set -eu
cd "$(dirname "$0")/.."
sh contrib/setup.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
cargo build --release --locked --bin cairn
exec "$CARGO_TARGET_DIR/release/cairn" "$@" demo

#!/bin/sh
# Quick start: install build dependencies, build cairn and run `cairn demo`, which generates a
# regtest chain into ~/.cairn/regtest, validates it with Bitcoin Core's kernel and keeps serving
# until Ctrl-C. Extra arguments go to `cairn`, e.g. `--datadir /tmp/cairn`. It builds in the `ci`
# profile, the one `contrib/test.sh` uses, so the tests reuse its C++ builds of RocksDB and the
# kernel.
set -eu
cd "$(dirname "$0")/.."
sh contrib/setup.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
cargo build --profile ci --locked --bin cairn
exec "$CARGO_TARGET_DIR/ci/cairn" "$@" demo

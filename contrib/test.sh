#!/bin/sh
# The whole test suite: installs build dependencies and the reference bitcoind, then runs every
# test in the release profile (a debug build would compile RocksDB and the kernel a second time).
set -eu
cd "$(dirname "$0")/.."
sh contrib/setup.sh
sh contrib/install-bitcoind.sh /opt/bitcoind
export CAIRN_BITCOIND=/opt/bitcoind/bitcoind
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
cargo test --release --locked "$@"

#!/bin/sh
# The kill harness at full strength: SIGKILL at 50 random instants during a P2P sync and during
# an import (each restarted after every kill), then each index compared row for row with a clean
# one and 142 Electrum answers with a clean one's; and the kernel restarted below the index, then
# reorged (tests/it/crash.rs). The README's test command runs the same tests with 6 kills each.
#   sh contrib/crash-test.sh [KILLS]
set -eu
cd "$(dirname "$0")/.."
export CAIRN_CRASH_KILLS="${1:-50}"
export CAIRN_BITCOIND="${CAIRN_BITCOIND:-/opt/bitcoind/bitcoind}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
exec cargo test --profile ci --locked --test it -- crash:: --nocapture --test-threads=1

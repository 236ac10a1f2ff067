#!/bin/sh
# Runs bdk_electrum's own test suite (tests/test_electrum.rs of the crates.io package 0.24.1,
# driven by bdk_testenv) against cairn, started the way that harness starts electrs (through
# contrib/electrs-compat.sh). Arguments go to the test binary (e.g. a test name, --nocapture).
# Needs: a built cairn (this script builds it), bitcoind (contrib/install-bitcoind.sh), curl.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
work=${CAIRN_BDK_SUITE_DIR:-/var/tmp/cairn-bdk-suite}
command -v curl >/dev/null || { echo "bdk-suite: needs curl (sh contrib/setup.sh installs it)" >&2; exit 1; }
(cd "$root" && cargo build --release --locked --bin cairn)

# The package's sources, fetched through a one-dependency project with a pinned lock file.
mkdir -p "$work/fetch/src"
cp "$root/contrib/bdk-suite/Cargo.toml" "$root/contrib/bdk-suite/Cargo.lock" "$work/fetch/"
[ -e "$work/fetch/src/main.rs" ] || echo 'fn main() {}' >"$work/fetch/src/main.rs"
manifest=$(cd "$work/fetch" && cargo metadata --locked --format-version 1 |
  grep -o '"manifest_path":"[^"]*/bdk_electrum-0\.24\.1/Cargo\.toml"' | head -1 | cut -d'"' -f4)
[ -n "$manifest" ] || { echo "bdk-suite: bdk_electrum 0.24.1 sources not found" >&2; exit 1; }
rm -rf "$work/bdk_electrum"
cp -r "$(dirname "$manifest")" "$work/bdk_electrum"
# Publishing dropped the two dev-dependencies the suite has by path in the BDK repository
# (bdk_testenv, bdk_chain): put them back at their released versions, pinned by our lock file.
cat >>"$work/bdk_electrum/Cargo.toml" <<'TOML'

[dev-dependencies.bdk_testenv]
version = "=0.13.1"

[dev-dependencies.bdk_chain]
version = "0.23.1"
TOML
cp "$root/contrib/bdk-suite/suite.lock" "$work/bdk_electrum/Cargo.lock"

export BITCOIND_EXE="${CAIRN_BITCOIND:-/opt/bitcoind/bitcoind}"
export BITCOIND_SKIP_DOWNLOAD=1 ELECTRSD_SKIP_DOWNLOAD=1
export ELECTRS_EXE="${ELECTRS_EXE:-$root/contrib/electrs-compat.sh}"
export CAIRN_BIN="$CARGO_TARGET_DIR/release/cairn"
cd "$work/bdk_electrum"
CARGO_TARGET_DIR="$work/target" cargo test --release --locked --test test_electrum -- --test-threads=2 "$@"

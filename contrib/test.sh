#!/bin/sh
# The whole test suite: installs build dependencies, the reference bitcoind and the Electrum
# wallet, then runs every test in the release profile (a debug build would compile RocksDB and
# the kernel a second time).
set -eu
cd "$(dirname "$0")/.."
sh contrib/setup.sh
sh contrib/install-bitcoind.sh /opt/bitcoind
# The Electrum wallet 4.3.4, a real client for tests/electrum_wallet.rs.
if [ ! -x /usr/bin/electrum ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends electrum >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends electrum >/dev/null; }
fi
export CAIRN_BITCOIND=/opt/bitcoind/bitcoind
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
cargo test --release --locked "$@"
# bdk_electrum's own suite against cairn: the tests that do not race the harness (README, "BDK").
if [ $# -eq 0 ]; then
  sh contrib/bdk-suite.sh --exact test_sync_with_coinbase test_update_tx_graph_stop_gap \
    test_update_tx_graph_without_keychain test_stop_gap_past_last_revealed
fi

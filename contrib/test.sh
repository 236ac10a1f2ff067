#!/bin/sh
# The whole test suite: installs build dependencies, the reference bitcoind and the Electrum
# wallet, then runs every test in the `ci` profile: release speed (a debug build of RocksDB and
# the kernel is too slow to test with) with overflow checks and debug assertions on.
set -eu
cd "$(dirname "$0")/.."
sh contrib/setup.sh
sh contrib/install-bitcoind.sh /opt/bitcoind
# The Electrum wallet 4.3.4, a real client for tests/electrum_wallet.rs.
if [ ! -x /usr/bin/electrum ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends electrum >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends electrum >/dev/null; }
fi
# systemd-analyze, which checks contrib/cairn.service in tests/service.rs.
if ! command -v systemd-analyze >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null; }
fi
export CAIRN_BITCOIND=/opt/bitcoind/bitcoind
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
cargo test --profile ci --locked "$@"

#!/bin/sh
# The whole test suite: installs build dependencies, the reference bitcoind and the Electrum
# wallet, then runs every test in the `ci` profile: release speed (a debug build of RocksDB and
# the kernel is too slow to test with) with overflow checks and debug assertions on.
set -eu
cd "$(dirname "$0")/.."
sh contrib/setup.sh
# The oracle: Bitcoin Core 31.99 built from the source the kernel is built from (about 7
# minutes once, then kept outside the clone); and Bitcoin Knots 29.4, whose wallet signs where a
# test needs a wallet and whose policy the Knots profile is checked against.
sh contrib/build-core-bitcoind.sh /var/tmp/cairn-core
sh contrib/install-bitcoind.sh /opt/bitcoind
# The Electrum wallet 4.3.4, a real client for tests/it/electrum_wallet.rs.
if [ ! -x /usr/bin/electrum ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends electrum >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends electrum >/dev/null; }
fi
# systemd-analyze, which checks contrib/cairn.service (tests/it/service.rs), HAProxy, in front of
# two nodes in tests/it/haproxy.rs, promtool, which checks /metrics (tests/it/metrics.rs), and
# Chromium, which draws the status page and the explorer (tests/it/status_page.rs, explorer.rs).
for tool in systemd-analyze:systemd haproxy:haproxy promtool:prometheus chromium:chromium; do
  if ! command -v "${tool%%:*}" >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${tool#*:}" >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${tool#*:}" >/dev/null; }
  fi
done
export CAIRN_BITCOIND=/opt/bitcoind/bitcoind
export CAIRN_CORE_BITCOIND=/var/tmp/cairn-core/bin/bitcoind
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
# The tree is rustfmt-clean and clippy-clean (every allowed lint is named with its reason where it
# is allowed); both gate the tests. Clippy builds in the same profile, so it reuses the C++.
cargo fmt --check
cargo clippy --profile ci --locked --all-targets -- -D warnings
cargo test --profile ci --locked "$@"

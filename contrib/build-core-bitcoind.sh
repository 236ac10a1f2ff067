#!/bin/sh
# Builds Bitcoin Core 31.99's bitcoind and bitcoin-cli from the very source cairn's kernel is built
# from: the Core tree the `libbitcoinkernel-sys` crate vendors (the version Cargo.lock names). It
# is the oracle of the differential tests (policy, fees, filters, blocks, P2P). No wallet
# (src/wallet is not vendored) and no embedded ASMap (ip_asn.dat is not vendored). About 25
# minutes on 2 cores; the result is kept in DEST, outside the clone like cargo's target dir, and
# a second run only prints its version.
# Usage: contrib/build-core-bitcoind.sh [DEST]   (default /var/tmp/cairn-core)
set -eu
cd "$(dirname "$0")/.."
DEST=${1:-/var/tmp/cairn-core}
VERSION=$(sed -n '/^name = "libbitcoinkernel-sys"$/{n;s/^version = "\(.*\)"$/\1/p;}' Cargo.lock)
[ -n "$VERSION" ] || { echo "build-core-bitcoind: no libbitcoinkernel-sys in Cargo.lock" >&2; exit 1; }
STAMP="$DEST/bin/.libbitcoinkernel-sys-$VERSION"
if [ -f "$STAMP" ] && "$DEST/bin/bitcoind" -version >/dev/null 2>&1; then
  "$DEST/bin/bitcoind" -version | head -n 1; exit 0
fi
# The source: the crate as cargo fetched it for cairn's own build.
cargo fetch --locked -q
SRC=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"libbitcoinkernel-sys-$VERSION"/bitcoin 2>/dev/null | head -n 1)
[ -n "$SRC" ] || { echo "build-core-bitcoind: libbitcoinkernel-sys-$VERSION not in cargo's registry" >&2; exit 1; }
need=""
for p in cmake:cmake g++:g++ pkg-config:pkg-config; do command -v "${p%%:*}" >/dev/null 2>&1 || need="$need ${p#*:}"; done
for p in libevent-dev libboost-dev; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
if [ -n "$need" ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null; }
fi
mkdir -p "$DEST"
echo "build-core-bitcoind: building bitcoind $VERSION's Core tree in $DEST (about 7 minutes on 2 cores)" >&2
cmake -S "$SRC" -B "$DEST/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_DAEMON=ON -DBUILD_CLI=ON \
  -DENABLE_WALLET=OFF -DBUILD_GUI=OFF -DBUILD_TESTS=OFF -DBUILD_BENCH=OFF -DBUILD_FUZZ_BINARY=OFF \
  -DENABLE_IPC=OFF -DWITH_ZMQ=OFF -DBUILD_KERNEL_LIB=OFF -DBUILD_UTIL=OFF -DBUILD_TX=OFF \
  -DBUILD_WALLET_TOOL=OFF -DWITH_EMBEDDED_ASMAP=OFF >"$DEST/cmake.log" 2>&1 ||
  { tail -n 20 "$DEST/cmake.log" >&2; exit 1; }
cmake --build "$DEST/build" -j"$(nproc)" --target bitcoind bitcoin-cli >"$DEST/build.log" 2>&1 ||
  { tail -n 20 "$DEST/build.log" >&2; exit 1; }
mkdir -p "$DEST/bin"
cp "$DEST/build/bin/bitcoind" "$DEST/build/bin/bitcoin-cli" "$DEST/bin/"
touch "$STAMP"
"$DEST/bin/bitcoind" -version | head -n 1

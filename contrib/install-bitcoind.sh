#!/bin/sh
# Installs a real bitcoind + bitcoin-cli (Bitcoin Knots 29.x: Bitcoin Core's consensus code, RPC
# and P2P) on Debian 12 for cairn's reference tests, without touching the system's libc.
#
# Debian 12 has no bitcoind package and Debian unstable's `bitcoin-knots` needs a newer glibc, so
# this downloads that package and the newer libc6 / libstdc++6 / libgcc-s1 from Debian 13 through
# the Debian mirror apt already uses, unpacks them under DEST and writes wrappers DEST/bitcoind and
# DEST/bitcoin-cli that run the binaries through the newer dynamic loader.
#
# Usage: contrib/install-bitcoind.sh [DEST]      (default DEST=/opt/bitcoind)
set -eu
DEST=${1:-/opt/bitcoind}
if [ -x "$DEST/bitcoind" ] && "$DEST/bitcoind" -version >/dev/null 2>&1; then
  "$DEST/bitcoind" -version | head -n 1; exit 0
fi
MIRROR=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)[[:space:]]*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
[ -n "$MIRROR" ] || MIRROR=$(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\/debian\)[[:space:]].*/\2/p' /etc/apt/sources.list 2>/dev/null | head -n 1)
[ -n "$MIRROR" ] || { echo "install-bitcoind: no Debian mirror found in apt sources" >&2; exit 1; }
mkdir -p "$DEST/apt/lists/partial" "$DEST/apt/cache/archives/partial" "$DEST/debs" "$DEST/root"
KEY=/usr/share/keyrings/debian-archive-keyring.gpg
printf 'deb [signed-by=%s] %s sid main\ndeb [signed-by=%s] %s trixie main\n' "$KEY" "$MIRROR" "$KEY" "$MIRROR" > "$DEST/apt/sources.list"
O="-o Dir::Etc::SourceList=$DEST/apt/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=$DEST/apt/lists -o Dir::Cache=$DEST/apt/cache -o APT::Sandbox::User=root"
apt-get $O update -qq
(cd "$DEST/debs" && apt-get $O download bitcoin-knots/sid libc6/trixie libstdc++6/trixie libgcc-s1/trixie)
for f in "$DEST"/debs/*.deb; do dpkg -x "$f" "$DEST/root"; done
apt-get update -qq
apt-get install -y -qq libzmq5 libevent-core-2.1-7 libevent-extra-2.1-7 libevent-pthreads-2.1-7 libsqlite3-0 >/dev/null
for b in bitcoind bitcoin-cli; do
  cat > "$DEST/$b" <<EOS
#!/bin/sh
R=$DEST/root
exec \$R/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path \$R/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu \$R/usr/bin/$b "\$@"
EOS
  chmod +x "$DEST/$b"
done
"$DEST/bitcoind" -version | head -n 1

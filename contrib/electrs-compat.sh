#!/bin/sh
# Starts cairn from an electrs command line, for test harnesses written for electrs (the
# `electrsd` crate, which bdk_electrum's tests use). electrs takes its blocks from a bitcoind;
# cairn validates them itself and gets them over P2P:
#   --daemon-p2p-addr A      cairn connects to A;
#   otherwise (--jsonrpc-import, a bitcoind started with -listen=0) cairn listens on a free
#   loopback port and asks the bitcoind, over its JSON-RPC (--daemon-rpc-addr with --cookie or
#   --cookie-file), to connect to it (`addnode <cairn> add`, v1 transport).
# --db-dir holds cairn's data folder; --electrum-rpc-addr is where Electrum clients connect.
# --monitoring-addr and --http-addr (electrs's Prometheus and Esplora ports) are ignored.
# cairn replaces this shell (exec), so the harness's SIGUSR1 (sync now) and kill reach it.
# CAIRN_BIN names the cairn binary (default: cairn on PATH); CAIRN_COMPAT_LOG_DIR, if set,
# gets one debug log per cairn started.
set -eu
if [ -n "${CAIRN_COMPAT_LOG_DIR:-}" ]; then
  mkdir -p "$CAIRN_COMPAT_LOG_DIR"
  export CAIRN_LOG=${CAIRN_LOG:-cairn=debug,info}
  exec 2>>"$CAIRN_COMPAT_LOG_DIR/cairn-$$.log"
fi
cairn=${CAIRN_BIN:-cairn}
db= network=regtest cookie= cookie_file= rpc= p2p= electrum=127.0.0.1:60401
while [ $# -gt 0 ]; do
  case "$1" in
    --db-dir) db=$2; shift 2 ;;
    --network) network=$2; shift 2 ;;
    --cookie) cookie=$2; shift 2 ;;
    --cookie-file) cookie_file=$2; shift 2 ;;
    --daemon-rpc-addr) rpc=$2; shift 2 ;;
    --daemon-p2p-addr) p2p=$2; shift 2 ;;
    --electrum-rpc-addr) electrum=$2; shift 2 ;;
    --monitoring-addr|--http-addr|--daemon-dir|--blocks-dir) shift 2 ;;
    --jsonrpc-import|-v*) shift ;;
    *) echo "electrs-compat: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$db" ] || { echo "electrs-compat: --db-dir is required" >&2; exit 2; }
case "$network" in
  bitcoin) network=mainnet ;;
  testnet) echo "electrs-compat: cairn runs testnet4, not testnet3" >&2; exit 2 ;;
esac
datadir="$db/cairn"
mkdir -p "$datadir"
set -- --network "$network" --datadir "$datadir" --admin-addr 127.0.0.1:0 --electrum-addr "$electrum"
if [ -n "$p2p" ]; then
  exec "$cairn" "$@" --connect "$p2p" --no-listen run
fi
[ -n "$rpc" ] || { echo "electrs-compat: needs --daemon-p2p-addr or --daemon-rpc-addr" >&2; exit 2; }
if [ -z "$cookie" ] && [ -n "$cookie_file" ]; then
  cookie=$(cat "$cookie_file")
fi
rpc_call() {
  curl -sf --user "$cookie" -H 'content-type: text/plain' \
    --data-binary "{\"jsonrpc\":\"1.0\",\"id\":\"cairn\",\"method\":\"$1\",\"params\":$2}" "http://$rpc/" >/dev/null
}
# Once cairn runs, read its P2P port from `cairn status` and have the daemon connect to it.
(
  tries=0
  while [ $tries -lt 600 ]; do
    tries=$((tries + 1))
    sleep 0.1
    [ -e "$datadir/$network/admin.addr" ] || continue
    listen=$("$cairn" --network "$network" --datadir "$datadir" status --json 2>/dev/null |
      sed -n 's/.*"listen":"\([^"]*\)".*/\1/p')
    [ -n "$listen" ] || continue
    # `onetry` connects at once; `add` keeps the daemon reconnecting if the link drops.
    if rpc_call addnode "[\"$listen\",\"onetry\",false]" && rpc_call addnode "[\"$listen\",\"add\",false]"; then
      exit 0
    fi
  done
  echo "electrs-compat: could not ask the daemon at $rpc to connect to cairn" >&2
) &
exec "$cairn" "$@" --p2p-addr 127.0.0.1:0 run

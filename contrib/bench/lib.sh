# Shared by the benchmark scripts: the build and the cached chain, elapsed time, medians, the
# interleaved A/B comparison with its JSON record, and the ElectrumX and cairn servers of the
# query and wallet comparisons. Source it after defining RUNS, BLOCKS and TXS.

# The command that is running, for the JSON records.
BENCH_COMMAND="sh $0 $*"

# Every chain here is regtest's (cairn itself runs on mainnet unless told otherwise).
export CAIRN_NETWORK="${CAIRN_NETWORK:-regtest}"

# bench_setup [CARGO BUILD ARGS...]: builds cairn (and what else is named) in release (or
# CAIRN_BENCH_PROFILE), sets
# CAIRN, CHAIN (the generated chain, cached in ${CAIRN_BENCH_CACHE:-/var/tmp/cairn-bench}; with
# WALLET_ADDRESSES set, a chain that also pays a BIP84 wallet of that many addresses (2% of all
# outputs, or WALLET_PER_MILLE per thousand); with
# HOT_PER_MILLE set, one whose busiest script gets that share of all outputs; with SHAPE=mainnet,
# one whose transactions copy mainnet block 951658's shapes: `cairn generate --shape`; with
# SIGNATURES=none, one whose spends need no signature, the kernel's cost below mainnet's
# assume-valid block: `cairn generate --signatures none`),
# EXAMPLES (where the examples named are built), BITCOIND, CLI and WORK (a scratch folder).
# Installs what is missing first.
bench_setup() {
  # What a fresh machine lacks: build dependencies and nc (setup.sh), the reference bitcoind,
  # and GNU time for peak RSS.
  sh contrib/setup.sh
  [ -n "${CAIRN_BITCOIND:-}" ] || [ -x /opt/bitcoind/bitcoind ] || sh contrib/install-bitcoind.sh /opt/bitcoind >/dev/null
  if [ ! -x /usr/bin/time ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null; }
  fi
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
  # CAIRN_BENCH_PROFILE=ci measures the test profile's build (overflow checks and debug
  # assertions on) where a release build (RocksDB's C++ again, about 30 minutes here) is not
  # worth it for a ratio; a figure from it says so.
  profile=${CAIRN_BENCH_PROFILE:-release}
  # The load generators and clients built beside cairn (`bench_setup --example NAME`), in the
  # same profile.
  EXAMPLES="$CARGO_TARGET_DIR/$profile/examples"
  # CAIRN_BIN=/path/to/cairn measures that build instead (a copy kept before a change), so
  # scripts without an A/B mode can be run for two builds in turn.
  if [ -n "${CAIRN_BIN:-}" ]; then
    CAIRN=$CAIRN_BIN
    [ $# -eq 0 ] || cargo build --profile "$profile" --locked "$@" >/dev/null 2>&1
  else
    cargo build --profile "$profile" --locked --bin cairn "$@" >/dev/null 2>&1
    CAIRN="$CARGO_TARGET_DIR/$profile/cairn"
  fi
  CHAIN="${CAIRN_BENCH_CACHE:-/var/tmp/cairn-bench}/chain-$BLOCKS-$TXS-seed1"
  set -- --blocks "$BLOCKS" --txs-per-block "$TXS" --seed 1
  if [ -n "${SHAPE:-}" ]; then
    CHAIN="$CHAIN-$SHAPE"
    set -- "$@" --shape "$SHAPE"
  fi
  if [ "${SIGNATURES:-all}" = none ]; then
    CHAIN="$CHAIN-nosig"
    set -- "$@" --signatures none
  fi
  if [ "${HOT_PER_MILLE:-0}" -gt 0 ]; then
    CHAIN="$CHAIN-hot$HOT_PER_MILLE"
    set -- "$@" --hot-per-mille "$HOT_PER_MILLE"
  fi
  if [ "${WALLET_ADDRESSES:-0}" -gt 0 ]; then
    CHAIN="$CHAIN-wallet$WALLET_ADDRESSES"
    set -- "$@" --wallet-addresses "$WALLET_ADDRESSES"
    if [ -n "${WALLET_PER_MILLE:-}" ]; then
      CHAIN="$CHAIN-pm$WALLET_PER_MILLE"
      set -- "$@" --wallet-per-mille "$WALLET_PER_MILLE"
    fi
  fi
  [ -f "$CHAIN/blocks.hex" ] || "$CAIRN" generate "$@" --out "$CHAIN"
  BITCOIND=${CAIRN_BITCOIND:-/opt/bitcoind/bitcoind}
  CLI="$(dirname "$BITCOIND")/bitcoin-cli"
  WORK=$(mktemp -d)
}

# loadblock_args: bitcoind's -loadblock for every blk file of the chain, in order.
loadblock_args() { for f in "$CHAIN"/blocks/blk*.dat; do printf -- '-loadblock=%s ' "$f"; done; }

# peer_stack P2P_PORT RPC_PORT: a bitcoind in $WORK/peer holding $CHAIN (user u, password p),
# listening on 127.0.0.1:P2P_PORT; returns once it has every block.
peer_stack() {
  mkdir -p "$WORK/peer"
  "$BITCOIND" -regtest -datadir="$WORK/peer" -port="$1" -bind=127.0.0.1 -rpcport="$2" -rpcuser=u -rpcpassword=p \
    $(loadblock_args) -daemon -printtoconsole=0 >/dev/null
  waited=0
  until [ "$("$CLI" -regtest -datadir="$WORK/peer" -rpcport="$2" -rpcuser=u -rpcpassword=p getblockcount 2>/dev/null || echo 0)" = "$BLOCKS" ]; do
    sleep 0.5; waited=$((waited + 1))
    # Gone (no pid file after 10 s) or still short of the tip after 10 minutes: say why, stop.
    if [ "$waited" -gt 1200 ] || { [ "$waited" -gt 20 ] && [ ! -f "$WORK/peer/regtest/bitcoind.pid" ]; }; then
      echo "the peer bitcoind did not load the chain; the end of its log:" >&2
      tail -20 "$WORK/peer/regtest/debug.log" >&2 || true
      exit 1
    fi
  done
}

# need_electrs: sets ELECTRS (CAIRN_ELECTRS or /opt/electrs/bin/electrs), installing electrs
# 0.11.1 there when missing (contrib/install-electrs.sh, about 15 minutes the first time).
need_electrs() {
  ELECTRS=${CAIRN_ELECTRS:-/opt/electrs/bin/electrs}
  [ -x "$ELECTRS" ] || sh contrib/install-electrs.sh "$(dirname "$(dirname "$ELECTRS")")" >/dev/null
}

# electrs_node P2P_PORT RPC_PORT [BITCOIND ARGS...]: a regtest bitcoind in $WORK/node (user u,
# password p) loading the chain's blk files (-loadblock), for electrs to index; returns once it has
# every block. `node_cli` asks it; `electrs_node_cleanup` (an exit trap) stops electrs
# (ELECTRS_PID) and it, and removes WORK.
electrs_node() {
  NODE_RPC_PORT=$2
  node_p2p=$1; shift 2
  mkdir -p "$WORK/node"
  "$BITCOIND" -regtest -datadir="$WORK/node" -port="$node_p2p" -bind=127.0.0.1 -rpcport="$NODE_RPC_PORT" \
    -rpcuser=u -rpcpassword=p -maxtipage=2000000000 -connect=0 -listen=1 "$@" $(loadblock_args) \
    -daemon -printtoconsole=0 >/dev/null
  until [ "$(node_cli getblockcount 2>/dev/null || echo 0)" = "$BLOCKS" ]; do sleep 0.5; done
}
node_cli() { "$CLI" -regtest -datadir="$WORK/node" -rpcport="$NODE_RPC_PORT" -rpcuser=u -rpcpassword=p "$@"; }
electrs_node_cleanup() {
  [ -z "${ELECTRS_PID:-}" ] || kill "$ELECTRS_PID" 2>/dev/null || true
  [ -z "${NODE_RPC_PORT:-}" ] || node_cli stop >/dev/null 2>&1 || true
  sleep 2; rm -rf "$WORK"
}

# start_electrs NODE_DIR RPC_PORT P2P_PORT DB_DIR ELECTRUM_PORT: electrs indexing the regtest
# bitcoind of NODE_DIR (user u, password p) into DB_DIR, serving Electrum on ELECTRUM_PORT, in
# the background (log: DB_DIR.log); sets ELECTRS_PID.
start_electrs() {
  # electrs reads RPC credentials as a cookie file's "user:password".
  printf 'u:p' > "$4.cookie"
  "$ELECTRS" --network regtest --daemon-dir "$1" --daemon-rpc-addr "127.0.0.1:$2" \
    --daemon-p2p-addr "127.0.0.1:$3" --db-dir "$4" --electrum-rpc-addr "127.0.0.1:$5" \
    --cookie-file "$4.cookie" --log-filters warn >"$4.log" 2>&1 &
  ELECTRS_PID=$!
}

# electrum_at PORT HEIGHT [HEADER_HEX]: whether the Electrum server on PORT answers
# blockchain.headers.subscribe with HEIGHT (and that header, when given).
electrum_at() {
  python3 - "$@" <<'PY' 2>/dev/null
import json, socket, sys
port, height = int(sys.argv[1]), int(sys.argv[2])
header = sys.argv[3] if len(sys.argv) > 3 else None
s = socket.create_connection(("127.0.0.1", port), timeout=5)
f = s.makefile("rwb")
for i, (m, p) in enumerate([("server.version", ["cairn-bench", "1.4"]), ("blockchain.headers.subscribe", [])]):
    f.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}) + "\n").encode()); f.flush()
    answer = json.loads(f.readline())
r = answer.get("result") or {}
sys.exit(0 if r.get("height") == height and header in (None, r.get("hex")) else 1)
PY
}

# disk DIR...: bytes under each (apparent sizes), summed; missing folders count 0.
disk() { du -sb "$@" 2>/dev/null | awk '{s += $1} END {print s + 0}'; }

# elapsed START END: seconds between two `date +%s.%N` stamps.
elapsed() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.3f\n", e - s }'; }

# cpu_of PID...: the processes' user + system CPU seconds so far, summed (/proc/PID/stat fields 14
# and 15).
cpu_of() {
  for p in "$@"; do
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.3f\n", ($12 + $13) / hz }' "/proc/$p/stat"
  done | awk '{s += $1} END {printf "%.3f\n", s}'
}

# median: the median of the numbers on standard input.
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# compare LABEL_A FUNC_A LABEL_B FUNC_B: runs FUNC_A and FUNC_B (each prints its seconds)
# interleaved RUNS times, prints every sample, then a markdown row with both medians and B / A,
# and writes every sample, the medians, the commit, the machine and the command to a JSON file
# (see results_file; the path is printed last). A script may define bench_extra, printing a JSON
# value recorded as "extra".
compare() {
  : > "$WORK/samples-a.txt"; : > "$WORK/samples-b.txt"
  i=1
  while [ "$i" -le "$RUNS" ]; do
    a=$($2); echo "run $i  $1: ${a}s"; echo "$a" >> "$WORK/samples-a.txt"
    b=$($4); echo "run $i  $3: ${b}s"; echo "$b" >> "$WORK/samples-b.txt"
    i=$((i + 1))
  done
  ma=$(median < "$WORK/samples-a.txt"); mb=$(median < "$WORK/samples-b.txt")
  ratio=$(awk -v a="$ma" -v b="$mb" 'BEGIN { print b / a }')
  echo
  echo "| chain | $1 (median) | $3 (median) | $3 / $1 |"
  echo "|---|---|---|---|"
  printf '| %s blocks x %s txs/block | %.4g s | %.4g s | %.3fx |\n' "$BLOCKS" "$TXS" "$ma" "$mb" "$ratio"
  commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
  [ -z "${CAIRN_BIN:-}" ] || commit="$CAIRN_BIN (tree $commit)"
  mem=$(awk '/MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)
  echo "machine: $(nproc) cores, $mem GiB; commit $commit"
  json=$(results_file "$(basename "$0" .sh)-$BLOCKS-$TXS")
  cat > "$json" <<JSON
{
  "benchmark": "$(basename "$0" .sh)",
  "command": "$BENCH_COMMAND",
  "commit": "$commit",
  "machine": {"nproc": $(nproc), "mem_gib": $mem, "cpu": "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"},
  "chain": {"dir": "$CHAIN", "blocks": $BLOCKS, "txs_per_block": $TXS},
  "unit": "seconds",
  "a": {"label": "$1", "samples": [$(paste -sd, "$WORK/samples-a.txt")], "median": $ma},
  "b": {"label": "$3", "samples": [$(paste -sd, "$WORK/samples-b.txt")], "median": $mb},
  "ratio_b_over_a": $ratio$(command -v bench_extra >/dev/null && printf ',\n  "extra": %s' "$(bench_extra)")
}
JSON
  echo "samples written to $json"
}

# The ElectrumX side of the query and wallet comparisons.
# electrumx_stack SERVICES: a bitcoind (-txindex, RPC on port 29041, user u, password p) holding
# $CHAIN, and ElectrumX indexing it over RPC and then serving SERVICES (e.g. ws://127.0.0.1:29052).
# ElectrumX runs with its cost throttling off (COST_SOFT_LIMIT=0, COST_HARD_LIMIT=0), room for
# large answers (MAX_SEND 64 MB), and its TCP transport's hold-back of small answers (up to 1 s,
# waiting for more to pad a packet with) set to 0 s: it is measured, not its DoS limits or
# traffic-analysis countermeasures. Padding itself stays. EX_MAX_SEND overrides MAX_SEND. Sets
# EX_PID and EX_INDEX_SECONDS
# (from start to listening: ElectrumX listens once it has caught up and flushed).
# indexed_node: the bitcoind ElectrumX and Fulcrum read the chain from (-txindex, RPC port
# 29041, user u, password p), started unless it runs; returns once it has every block indexed.
# -maxtipage: a generated chain's tip is old, and Fulcrum serves nothing while bitcoind says it
# is in its initial download.
indexed_node() {
  if ! node_rpc getblockcount >/dev/null 2>&1; then
    mkdir -p "$WORK/node"
    "$BITCOIND" -regtest -datadir="$WORK/node" -rpcport=29041 -rpcuser=u -rpcpassword=p \
      -listen=0 -txindex -maxtipage=2000000000 $(loadblock_args) -daemon -printtoconsole=0 >/dev/null
  fi
  until [ "$(node_rpc getblockcount 2>/dev/null || echo 0)" = "$BLOCKS" ] && node_rpc getindexinfo 2>/dev/null | grep -q '"synced": true'; do sleep 0.5; done
}
electrumx_stack() {
  ELECTRUMX=${CAIRN_ELECTRUMX:-/opt/electrumx}
  [ -x "$ELECTRUMX/bin/electrumx_server" ] || sh contrib/install-electrumx.sh "$ELECTRUMX" >/dev/null
  mkdir -p "$WORK/ex"
  indexed_node
  ex_start=$(date +%s.%N)
  env COIN=Bitcoin NET=regtest DB_ENGINE=leveldb DB_DIRECTORY="$WORK/ex" \
    DAEMON_URL="http://u:p@127.0.0.1:29041/" SERVICES="$1" \
    PEER_DISCOVERY=off PEER_ANNOUNCE= ALLOW_ROOT=1 COST_SOFT_LIMIT=0 COST_HARD_LIMIT=0 \
    MAX_SEND=${EX_MAX_SEND:-64000000} REQUEST_TIMEOUT=600 MAX_SESSIONS=1000 LOG_LEVEL=warning \
    "$ELECTRUMX/bin/python3" -c 'import sys
import electrumx.server.transport as t
t.PaddedRSTransport.WAIT_FOR_BUFFER_GROWTH_SECONDS = 0.0
from electrumx.cli.electrumx_server import main
sys.exit(main())' > "$WORK/electrumx.log" 2>&1 &
  EX_PID=$!
  listening "$EX_PID" "${1##*:}" "$WORK/electrumx.log" || return 1
  EX_INDEX_SECONDS=$(elapsed "$ex_start" "$(date +%s.%N)")
}
node_rpc() { "$CLI" -regtest -datadir="$WORK/node" -rpcport=29041 -rpcuser=u -rpcpassword=p "$@"; }

# fulcrum_stack WS_ADDR [TCP_ADDR]: Fulcrum 2.1.1 (contrib/install-fulcrum.sh; CAIRN_FULCRUM
# names another binary) indexing the chain from indexed_node's bitcoind, serving WebSocket on
# WS_ADDR (and TCP on TCP_ADDR, when given) once it has; sets FULCRUM_INDEX_SECONDS. As ElectrumX beside it: no peers, and no limit that a
# benchmark's load would meet (the history size, the per-client bitcoind throttle; loopback is
# spared the per-address limits by default).
fulcrum_stack() {
  FULCRUM=${CAIRN_FULCRUM:-/opt/fulcrum/Fulcrum}
  [ -x "$FULCRUM" ] || sh contrib/install-fulcrum.sh "$(dirname "$FULCRUM")" >/dev/null
  mkdir -p "$WORK/fulcrum"
  indexed_node
  cat > "$WORK/fulcrum.conf" <<CONF
datadir = $WORK/fulcrum
bitcoind = 127.0.0.1:29041
rpcuser = u
rpcpassword = p
ws = $1
${2:+tcp = $2}
peering = false
announce = false
max_history = 25000000
max_buffer = 64000000
bitcoind_throttle = 10000 5000 5000
max_clients_per_ip = 100000
CONF
  f_start=$(date +%s.%N)
  "$FULCRUM" "$WORK/fulcrum.conf" > "$WORK/fulcrum.log" 2>&1 &
  FULCRUM_PID=$!
  listening "$FULCRUM_PID" "${1##*:}" "$WORK/fulcrum.log" || return 1
  FULCRUM_INDEX_SECONDS=$(elapsed "$f_start" "$(date +%s.%N)")
}
# cairn_stack ARGS...: cairn validating and indexing $CHAIN (`cairn import`), then serving it
# with `cairn ARGS... run` (no P2P). Waits for the first --electrum-*addr port. Sets CAIRN_PID and
# CAIRN_INDEX_SECONDS.
cairn_stack() {
  c_start=$(date +%s.%N)
  "$CAIRN" --datadir "$WORK/cairn" import --blocks-dir "$CHAIN/blocks" >/dev/null 2>&1
  CAIRN_INDEX_SECONDS=$(elapsed "$c_start" "$(date +%s.%N)")
  # As ElectrumX beside it, with its cost throttling off (ElectrumX's COST_SOFT_LIMIT=0).
  CAIRN_ELECTRUM_COST_SOFT_LIMIT=0 CAIRN_ELECTRUM_COST_HARD_LIMIT=0 \
    "$CAIRN" --datadir "$WORK/cairn" --admin-addr 127.0.0.1:0 --no-listen "$@" run >"$WORK/cairn.log" 2>&1 &
  CAIRN_PID=$!
  port=$(echo "$*" | sed -n 's/.*--electrum[a-z-]*addr[= ][0-9.]*:\([0-9]*\).*/\1/p')
  listening "$CAIRN_PID" "$port" "$WORK/cairn.log"
}
# listening PID PORT LOG: waits until the server PID listens on 127.0.0.1:PORT; if it exits
# first, prints the end of its LOG and fails.
listening() {
  until nc -z 127.0.0.1 "$2" 2>/dev/null; do
    kill -0 "$1" 2>/dev/null || { tail -20 "$3"; return 1; }
    sleep 0.2
  done
}
# queries_against NAME URL: electrum_load with the server NAME at URL (the baseline) and
# cairn_stack's WebSocket at 127.0.0.1:29062, the same mix at 1, 10 and 100 clients, RUNS runs
# of REQUESTS, answers compared first; the samples in a JSON file named after the script.
queries_against() {
  "$EXAMPLES/electrum_load" --chain "$CHAIN" \
    --server "$1=$2" --server "cairn=ws://127.0.0.1:29062" \
    --clients 1,10,100 --runs "$RUNS" --requests "$REQUESTS" \
    --json "$(results_file "$(basename "$0" .sh)-$BLOCKS-$TXS")" \
    --command "sh contrib/bench/$(basename "$0") $BLOCKS $TXS $RUNS $REQUESTS"
}

# wallet_sync_client: builds the BDK client of contrib/bench/wallet-sync (its own target dir,
# CAIRN_WALLET_SYNC_TARGET) in cairn's profile and sets CLIENT to it.
wallet_sync_client() {
  (cd contrib/bench/wallet-sync && CARGO_TARGET_DIR=${CAIRN_WALLET_SYNC_TARGET:-/var/tmp/cairn-wallet-sync-target} \
    cargo build --profile "${profile:-release}" --locked >/dev/null 2>&1)
  CLIENT=${CAIRN_WALLET_SYNC_TARGET:-/var/tmp/cairn-wallet-sync-target}/${profile:-release}/cairn-wallet-sync
}

# stack_cleanup: stops what electrumx_stack and cairn_stack started and removes WORK.
stack_cleanup() {
  [ -n "${EX_PID:-}" ] && kill "$EX_PID" 2>/dev/null
  [ -n "${FULCRUM_PID:-}" ] && kill "$FULCRUM_PID" 2>/dev/null
  [ -n "${CAIRN_PID:-}" ] && kill "$CAIRN_PID" 2>/dev/null
  node_rpc stop >/dev/null 2>&1 || true
  sleep 2; rm -rf "$WORK"
}

# results_file NAME: where a benchmark's JSON goes (${CAIRN_BENCH_OUT:-/var/tmp/cairn-bench/results}).
results_file() {
  d=${CAIRN_BENCH_OUT:-/var/tmp/cairn-bench/results}
  mkdir -p "$d"
  echo "$d/$1-$(date -u +%Y%m%dT%H%M%SZ).json"
}

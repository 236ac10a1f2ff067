#!/bin/sh
# Cold start, the comparison a user makes: from an empty disk to the first correct Electrum
# answer at the tip, and the disk that took, for
#   cairn     syncing over P2P from a local bitcoind (the peer) that holds the chain;
#   electrs   a second bitcoind syncing from the peer, with electrs 0.11.1 indexing it as soon as
#             bitcoind leaves initial block download;
#   ElectrumX a third bitcoind (-txindex, which ElectrumX needs) syncing from the peer, with
#             ElectrumX 1.20 indexing it from its RPC;
#   Fulcrum   the same, with Fulcrum 2.1.1 indexing it from its RPC.
# SIDES chooses which of them run beside cairn (default "electrs electrumx"; e.g.
# SIDES="fulcrum", or SIDES="electrs electrumx fulcrum").
# Each side starts empty, RUNS times, the sides taking turns. "At the tip": the server answers
# blockchain.headers.subscribe with the peer's tip height and header. Reports each side's
# median seconds and their ratios to cairn, and each side's disk bytes (blocks, chainstate,
# indexes) after its last run (cairn's both at its first answer and once it compacted after the
# sync). Then the index bytes each side needs to answer the same questions: cairn's index;
# electrs's and ElectrumX's databases each with bitcoind's -txindex and -blockfilterindex.
#
# The generated chain's timestamps are from 2011: the bitcoinds get -maxtipage=2000000000 so
# they leave initial block download at the tip (electrs waits for that); cairn's own rule counts
# a regtest tip's age only at genesis.
#
# Usage: contrib/bench/cold-start.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS]
# Defaults: 2000 blocks, 53 txs per block (about 100k transactions), 3 runs.
# Installs what is missing of the sides asked for: bitcoind, ElectrumX
# (contrib/install-electrumx.sh), electrs (contrib/install-electrs.sh, about 15 minutes of building
# the first time) and Fulcrum (contrib/install-fulcrum.sh, about 6 minutes).
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
. contrib/bench/lib.sh
bench_setup
SIDES=${SIDES:-electrs electrumx}
side() { case " $SIDES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
side electrs && need_electrs
ELECTRUMX=${CAIRN_ELECTRUMX:-/opt/electrumx}
if side electrumx; then
  [ -x "$ELECTRUMX/bin/electrumx_server" ] || sh contrib/install-electrumx.sh "$ELECTRUMX" >/dev/null
fi
FULCRUM=${CAIRN_FULCRUM:-/opt/fulcrum/Fulcrum}
if side fulcrum; then
  [ -x "$FULCRUM" ] || sh contrib/install-fulcrum.sh "$(dirname "$FULCRUM")" >/dev/null
fi
rpc() { dir=$1; port=$2; shift 2; "$CLI" -regtest -datadir="$dir" -rpcport="$port" -rpcuser=u -rpcpassword=p "$@"; }
PIDS=""
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null || true; done
  rpc "$WORK/peer" 29101 stop >/dev/null 2>&1 || true
  rpc "$WORK/node" 29111 stop >/dev/null 2>&1 || true
  sleep 2; rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
now() { date +%s.%N; }

# The peer: a bitcoind holding the chain.
peer_stack 29100 29101
TIP_HEADER=$(rpc "$WORK/peer" 29101 getblockheader "$(rpc "$WORK/peer" 29101 getbestblockhash)" false)

# wait_at_tip PORT: until the Electrum server on PORT answers headers.subscribe with the tip.
wait_at_tip() { until electrum_at "$1" "$BLOCKS" "$TIP_HEADER"; do sleep 0.2; done; }

# A syncing bitcoind in $WORK/node (P2P from the peer) with extra arguments.
start_node() {
  rm -rf "$WORK/node"; mkdir -p "$WORK/node"
  "$BITCOIND" -regtest -datadir="$WORK/node" -port=29110 -bind=127.0.0.1 -rpcport=29111 -rpcuser=u -rpcpassword=p \
    -connect=127.0.0.1:29100 -maxtipage=2000000000 -listen=1 ${NODE_EXTRA:-} "$@" -daemon -printtoconsole=0 >/dev/null
  until rpc "$WORK/node" 29111 getblockcount >/dev/null 2>&1; do sleep 0.1; done
}
# wait_indexes: until the node is at the tip and every index it builds reports synced.
wait_indexes() {
  until [ "$(rpc "$WORK/node" 29111 getblockcount)" = "$BLOCKS" ] &&
    ! rpc "$WORK/node" 29111 getindexinfo | grep -q '"synced": false'; do sleep 0.2; done
}
stop_node() {
  rpc "$WORK/node" 29111 stop >/dev/null 2>&1 || true
  while [ -f "$WORK/node/regtest/bitcoind.pid" ]; do sleep 0.2; done
}
# Disk figures are apparent sizes (`disk` in lib.sh): blk files are pre-allocated in 16 MiB
# steps on every side alike.
# side_disk DB_DIR: the stopped node's blocks, chainstate and indexes beside a server's DB_DIR.
side_disk() {
  r=$WORK/node/regtest
  echo "blocks $(disk "$r/blocks") chainstate $(disk "$r/chainstate") index $(disk "$r/indexes" "$1") total $(disk "$r/blocks" "$r/chainstate" "$r/indexes" "$1")"
}
# side_index NAME DB_DIR: a server's database beside the node's -txindex and -blockfilterindex.
side_index() {
  r=$WORK/node/regtest
  echo "$1 $(disk "$2") txindex $(disk "$r/indexes/txindex") blockfilterindex $(disk "$r/indexes/blockfilter") sum $(disk "$2" "$r/indexes")"
}

run_cairn() {
  rm -rf "$WORK/cairn"
  start=$(now)
  "$CAIRN" --datadir "$WORK/cairn" --admin-addr 127.0.0.1:0 --electrum-addr 127.0.0.1:29120 --no-listen \
    --connect 127.0.0.1:29100 run >"$WORK/cairn.log" 2>&1 &
  pid=$!; PIDS="$PIDS $pid"
  wait_at_tip 29120
  end=$(now)
  # SETTLE=1: before stopping, wait (2 minutes at most) for the compaction cairn runs once a
  # long catch-up is done, so the disk figure is the settled one.
  if [ "${SETTLE:-0}" = 1 ]; then
    n=0; until grep -q "index compacted" "$WORK/cairn.log" || [ $n -ge 600 ]; do sleep 0.2; n=$((n + 1)); done
  fi
  kill "$pid"; wait "$pid" 2>/dev/null || true
  d=$WORK/cairn/regtest
  CAIRN_DISK="blocks $(disk "$d/kernel/blocks") chainstate $(disk "$d/kernel/chainstate") index $(disk "$d/index") total $(disk "$d")"
  elapsed "$start" "$end"
}

run_electrs() {
  start=$(now)
  start_node
  rm -rf "$WORK/electrs"; mkdir -p "$WORK/electrs"
  start_electrs "$WORK/node" 29111 29110 "$WORK/electrs" 29130
  pid=$ELECTRS_PID; PIDS="$PIDS $pid"
  wait_at_tip 29130
  end=$(now)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  wait_indexes
  stop_node # flushes bitcoind's chainstate, as cairn's is when it stops
  ELECTRS_DISK=$(side_disk "$WORK/electrs")
  ELECTRS_INDEX=$(side_index electrs "$WORK/electrs")
  elapsed "$start" "$end"
}

# over_rpc DB_DIR PORT NAME COMMAND...: a bitcoind -txindex syncing from the peer, then COMMAND
# (a server indexing it over RPC into DB_DIR) until it answers at the tip on PORT; prints the
# seconds from the empty disk, and sets SIDE_DISK and SIDE_INDEX.
over_rpc() {
  # Names of their own: sh's variables are global, and `rpc` sets `dir` and `port`.
  side_db=$1; side_port=$2; side_name=$3; shift 3
  start=$(now)
  start_node -txindex
  wait_indexes
  rm -rf "$side_db"; mkdir -p "$side_db"
  "$@" >"$side_db.log" 2>&1 &
  pid=$!; PIDS="$PIDS $pid"
  wait_at_tip "$side_port"
  end=$(now)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  stop_node
  SIDE_DISK=$(side_disk "$side_db"); SIDE_INDEX=$(side_index "$side_name" "$side_db")
  elapsed "$start" "$end"
}

run_electrumx() {
  over_rpc "$WORK/ex" 29140 ElectrumX env COIN=Bitcoin NET=regtest DB_ENGINE=leveldb \
    DB_DIRECTORY="$WORK/ex" DAEMON_URL="http://u:p@127.0.0.1:29111/" \
    SERVICES=tcp://127.0.0.1:29140 PEER_DISCOVERY=off PEER_ANNOUNCE= ALLOW_ROOT=1 \
    LOG_LEVEL=warning "$ELECTRUMX/bin/electrumx_server"
  EX_DISK=$SIDE_DISK; EX_INDEX=$SIDE_INDEX
}

run_fulcrum() {
  # As in fulcrum_stack (lib.sh): no peers, no limit a benchmark meets.
  cat > "$WORK/fulcrum-cold.conf" <<CONF
datadir = $WORK/fulcrum
bitcoind = 127.0.0.1:29111
rpcuser = u
rpcpassword = p
tcp = 127.0.0.1:29150
peering = false
announce = false
CONF
  over_rpc "$WORK/fulcrum" 29150 Fulcrum "$FULCRUM" "$WORK/fulcrum-cold.conf"
  FULCRUM_DISK=$SIDE_DISK; FULCRUM_INDEX=$SIDE_INDEX
}

# Each side: its name in the runs, the function that runs it.
label_of() {
  case $1 in
    electrs) echo "bitcoind + electrs" ;;
    electrumx) echo "bitcoind -txindex + ElectrumX" ;;
    fulcrum) echo "bitcoind -txindex + Fulcrum" ;;
  esac
}
: > "$WORK/cairn.txt"; for s in $SIDES; do : > "$WORK/$s.txt"; done
i=1
while [ "$i" -le "$RUNS" ]; do
  t=$(run_cairn); echo "run $i  cairn: ${t}s"; echo "$t" >> "$WORK/cairn.txt"
  for s in $SIDES; do
    t=$(run_"$s"); echo "run $i  $(label_of "$s"): ${t}s"; echo "$t" >> "$WORK/$s.txt"
  done
  i=$((i + 1))
done
mc=$(median < "$WORK/cairn.txt")
# The disk figures come from subshells ($(run_...)): measure them once more here.
sizes() {
  run_cairn >/dev/null; echo "cairn, stopped at the first answer at the tip: $CAIRN_DISK"
  SETTLE=1 run_cairn >/dev/null; echo "cairn, stopped once it compacted after the sync (2 minutes at most; a sync under 1,000 blocks does not compact): $CAIRN_DISK"
  if side electrs; then run_electrs >/dev/null; echo "bitcoind + electrs: $ELECTRS_DISK"; fi
  if side electrumx; then run_electrumx >/dev/null; echo "bitcoind -txindex + ElectrumX: $EX_DISK"; fi
  if side fulcrum; then run_fulcrum >/dev/null; echo "bitcoind -txindex + Fulcrum: $FULCRUM_DISK"; fi
}
# index_sizes: what each side keeps to answer the same questions (any transaction by txid,
# histories, BIP158 filters): cairn's index compacted (`cairn index-stats`), also without the
# undo rows of recent blocks that a restart deletes, electrs's and ElectrumX's databases each with a
# bitcoind's -txindex and -blockfilterindex (one more, untimed, run each).
index_sizes() {
  "$CAIRN" --datadir "$WORK/cairn" index-stats > "$WORK/cairn-stats.json" 2>/dev/null
  python3 - "$WORK/cairn-stats.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cfs = " ".join(f"{k} {v}" for k, v in sorted(d["column_families"].items()))
kept = d["index_bytes"] - d["column_families"].get("undo", 0)
print(f"cairn index (compacted): {d['index_bytes']}; without the undo rows of blocks the kernel "
      f"had not yet certainly written, which the next start deletes: {kept} "
      f"({kept / d['txs']:.0f} bytes per transaction; {cfs})")
PY
  NODE_EXTRA="-txindex -blockfilterindex"
  if side electrs; then run_electrs >/dev/null; echo "electrs + bitcoind's indexes: $ELECTRS_INDEX"; fi
  if side electrumx; then run_electrumx >/dev/null; echo "ElectrumX + bitcoind's indexes: $EX_INDEX"; fi
  if side fulcrum; then run_fulcrum >/dev/null; echo "Fulcrum + bitcoind's indexes: $FULCRUM_INDEX"; fi
  NODE_EXTRA=
}
echo
head="| chain | cairn (median) |"; rule="|---|---|"; row=$(printf '| %s blocks x %s txs/block | %.2f s |' "$BLOCKS" "$TXS" "$mc")
fastest=
for s in $SIDES; do
  m=$(median < "$WORK/$s.txt")
  head="$head $(label_of "$s") |"; rule="$rule---|"; row="$row $(printf '%.2f s' "$m") |"
  fastest=$(awk -v a="${fastest:-$m}" -v b="$m" 'BEGIN { print (b < a) ? b : a }')
done
echo "$head cairn / the fastest other |"; echo "$rule---|"
echo "$row $(awk -v c="$mc" -v f="$fastest" 'BEGIN { printf "%.3fx", c / f }') |"
echo
echo "disk in bytes after a run (one more run each):"
sizes
echo
echo "index bytes to answer the same questions (transactions by txid, histories, BIP158 filters):"
index_sizes
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
[ -z "${CAIRN_BIN:-}" ] || commit="$CAIRN_BIN (tree $commit)"
json=$(results_file "cold-start-$BLOCKS-$TXS")
cat > "$json" <<JSON
{"benchmark": "cold-start", "command": "$BENCH_COMMAND", "commit": "$commit", "blocks": $BLOCKS, "txs_per_block": $TXS,
 "cairn": [$(paste -sd, "$WORK/cairn.txt")]$(for s in $SIDES; do printf ', "%s": [%s]' "$s" "$(paste -sd, "$WORK/$s.txt")"; done),
 "cairn_median": $mc}
JSON
echo "samples written to $json"

#!/bin/sh
# How cairn's costs grow with the chain: cairn alone on one generated chain, every figure the
# growth table needs (contrib/bench/growth_table.py puts several chains' side by side):
#   import   `cairn import` of the chain into an empty data dir: wall and CPU seconds, peak RSS;
#   disk     the index compacted (`cairn index-stats`, without the undo rows a later start
#            drops), bytes per transaction, and the kernel's blocks and chainstate;
#   queries  electrum_load over WebSocket (the mix of fulcrum.sh and queries.sh, one server):
#            p50, p99 and requests a second at 1, 10 and 100 clients, per request kind too;
#   memory   the server's peak RSS once the load is over.
# With MEMORY_LIMIT (e.g. 4G) both the import and the server run in a memory cgroup of that
# size (cgroup v2 or v1; page cache counted, as on a small machine), whose peak is printed.
# CAIRN_DATADIR=DIR serves a data dir that already holds the chain, or its first blocks (an
# import stopped partway: the load then asks about those blocks only), without importing.
# Prints a summary and writes the figures to a JSON file (the path is printed last).
#
# Usage: contrib/bench/growth.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [REQUESTS_PER_RUN]
# Defaults: 2000 blocks, 53 txs per block, 3 runs, 2000 requests. The growth table's chains:
# `SHAPE=mainnet SIGNATURES=none` with 2000 and 20000 blocks of 53 (S, M), and 20000 blocks of 530
# (ten times M: a regtest chain of 200,000 blocks imports in quadratic time, regtest's block-index
# check running over the whole index after every block).
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
REQUESTS=${4:-2000}
. contrib/bench/lib.sh
bench_setup --example electrum_load
CGROUP=""
cleanup() {
  [ -n "${CAIRN_PID:-}" ] && kill "$CAIRN_PID" 2>/dev/null && wait "$CAIRN_PID" 2>/dev/null
  [ -z "$CGROUP" ] || rmdir "$CGROUP" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# memory_cgroup LIMIT: creates a memory cgroup of LIMIT bytes (a number or 4G) and sets CGROUP
# and CGROUP_PEAK (the file holding its peak usage).
memory_cgroup() {
  bytes=$(numfmt --from=iec "$1")
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo +memory > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    CGROUP=/sys/fs/cgroup/cairn-growth-$$
    mkdir "$CGROUP"
    echo "$bytes" > "$CGROUP/memory.max"
    CGROUP_PEAK=$CGROUP/memory.peak
  else
    CGROUP=/sys/fs/cgroup/memory/cairn-growth-$$
    mkdir "$CGROUP"
    echo "$bytes" > "$CGROUP/memory.limit_in_bytes"
    CGROUP_PEAK=$CGROUP/memory.max_usage_in_bytes
  fi
}
# $WORK/held COMMAND...: runs COMMAND (exec: the same process) inside CGROUP when there is one.
write_held() {
  printf '#!/bin/sh\n[ -z "%s" ] || echo $$ > "%s/cgroup.procs"\nexec "$@"\n' "$CGROUP" "$CGROUP" > "$WORK/held"
  chmod +x "$WORK/held"
}
[ -z "${MEMORY_LIMIT:-}" ] || memory_cgroup "$MEMORY_LIMIT"
write_held

# Import: wall, user + system CPU and peak RSS by GNU time. With CAIRN_DATADIR, a data dir
# that holds (the first part of) the chain already, from an import stopped partway: no import
# figures, and the load asks about the blocks it holds.
DATA=${CAIRN_DATADIR:-$WORK/cairn}
import=None
if [ -z "${CAIRN_DATADIR:-}" ]; then
  "$WORK/held" /usr/bin/time -f '%e %U %S %M' -o "$WORK/import.time" \
    "$CAIRN" --datadir "$DATA" import --quiet --blocks-dir "$CHAIN/blocks" >/dev/null 2>"$WORK/import.log" ||
    { tail -20 "$WORK/import.log"; exit 1; }
  read -r import_s import_user import_sys import_kib < "$WORK/import.time"
  import="{'wall_s': $import_s, 'cpu_s': $import_user + $import_sys, 'peak_rss_kib': $import_kib}"
fi
"$CAIRN" --datadir "$DATA" index-stats > "$WORK/stats.json" 2>/dev/null
kernel_bytes=$(disk "$DATA/regtest/kernel")
LOAD_CHAIN=$CHAIN
height=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["index_tip"]["height"])' "$WORK/stats.json")
if [ "$height" -lt "$BLOCKS" ]; then
  LOAD_CHAIN=$WORK/chain
  mkdir -p "$LOAD_CHAIN"
  head -n "$height" "$CHAIN/blocks.hex" > "$LOAD_CHAIN/blocks.hex"
fi

# The server, its cost throttling off (as beside ElectrumX and Fulcrum), then the load.
"$WORK/held" env CAIRN_ELECTRUM_COST_SOFT_LIMIT=0 CAIRN_ELECTRUM_COST_HARD_LIMIT=0 \
  "$CAIRN" --datadir "$DATA" --admin-addr 127.0.0.1:0 --no-listen \
  --electrum-ws-addr 127.0.0.1:29082 --electrum-addr 127.0.0.1:29081 run >"$WORK/cairn.log" 2>&1 &
CAIRN_PID=$!
listening "$CAIRN_PID" 29082 "$WORK/cairn.log"
# A node fresh from its import compacts its index once, on a thread of its own (a minute at ten
# times M, on one core); a node serving for long has done so: the load waits for it.
sleep 5
while grep -qx compaction /proc/"$CAIRN_PID"/task/*/comm 2>/dev/null; do sleep 1; done
load_json=$(results_file "growth-load-$BLOCKS-$TXS")
"$EXAMPLES/electrum_load" --chain "$LOAD_CHAIN" --server "cairn=ws://127.0.0.1:29082" \
  --clients 1,10,100 --runs "$RUNS" --requests "$REQUESTS" --json "$load_json" \
  --command "$BENCH_COMMAND" >/dev/null
serve_kib=$(awk '/^VmHWM/ {print $2}' "/proc/$CAIRN_PID/status")
cgroup_peak=$([ -n "$CGROUP" ] && cat "$CGROUP_PEAK" 2>/dev/null || echo None)

json=$(results_file "growth-$BLOCKS-$TXS")
python3 - "$WORK/stats.json" "$load_json" "$json" <<PY
import json, statistics, sys
stats, load = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
txs = load["chain"]["txs"]
index = stats["index_bytes"] - stats["column_families"].get("undo", 0)
def med(c, pick):
    return statistics.median(pick(s) for s in load["samples"] if s["clients"] == c)
clients = sorted({s["clients"] for s in load["samples"]})
kinds = list(load["samples"][0]["per_kind"])
queries = {str(c): {
    "p50_ms": med(c, lambda s: s["p50_ms"]), "p99_ms": med(c, lambda s: s["p99_ms"]),
    "throughput_rps": med(c, lambda s: s["throughput_rps"]),
    "errors": sum(s["errors"] for s in load["samples"] if s["clients"] == c),
    "per_kind": {k: {"p50_ms": med(c, lambda s: s["per_kind"][k]["p50_ms"]),
                     "p99_ms": med(c, lambda s: s["per_kind"][k]["p99_ms"])} for k in kinds},
} for c in clients}
doc = {
    "benchmark": "growth", "command": "$BENCH_COMMAND", "commit": load["commit"],
    "machine": load["machine"], "chain": load["chain"]["dir"], "blocks": load["chain"]["blocks"],
    "txs": txs, "memory_limit": "${MEMORY_LIMIT:-}" or None, "import": $import,
    "disk": {"index_bytes": index, "index_bytes_per_tx": index / txs, "kernel_bytes": $kernel_bytes},
    "serve_peak_rss_kib": $serve_kib, "cgroup_peak_bytes": $cgroup_peak,
    "mismatches": len(load["check"]["mismatches"]), "queries": queries, "load": sys.argv[2],
}
if doc["import"]:
    doc["import"]["cpu_us_per_tx"] = doc["import"]["cpu_s"] / txs * 1e6
json.dump(doc, open(sys.argv[3], "w"), indent=1)
imported = doc["import"] and (f"import {doc['import']['wall_s']:.1f} s ({doc['import']['cpu_us_per_tx']:.1f} us CPU a tx, "
                              f"peak {doc['import']['peak_rss_kib'] / 1024:.0f} MiB)") or "no import (CAIRN_DATADIR)"
print(f"{load['chain']['blocks']} blocks, {txs} txs{' in ' + doc['memory_limit'] if doc['memory_limit'] else ''}: "
      f"{imported}; index {index} bytes ({index / txs:.1f} a tx), kernel {$kernel_bytes}; "
      f"server peak {$serve_kib / 1024:.0f} MiB")
for c, q in queries.items():
    print(f"  {c} clients: p50 {q['p50_ms']:.3f} ms, p99 {q['p99_ms']:.2f} ms, {q['throughput_rps']:.0f} req/s, {q['errors']} errors")
PY
echo "written to $json"

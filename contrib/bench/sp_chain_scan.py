#!/usr/bin/env python3
"""A whole chain's remote scan (Frigate's dialect), timed: driven by contrib/bench/sp-chain-scan.sh.

Each run opens a connection, subscribes a random wallet (a fresh scan secret, the generator as
spend key, change's label only, as Sparrow asks) from height 0, and reads notifications until
one tells progress 1.0: the wall time from the request, cairn's CPU time over it (utime + stime
of its process, every thread), and the transactions found (none expected: no one pays a random
wallet).

Usage: sp_chain_scan.py CAIRN_PID ELECTRUM_PORT RUNS (one JSON line a run).
"""

import json
import secrets
import socket
import sys
import time

from sp_block_cpu import cpu_seconds

# The generator, compressed: a valid spend key.
SPEND = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"


def lines(sock):
    buf = b""
    while True:
        data = sock.recv(1 << 20)
        if not data:
            raise RuntimeError("cairn closed the connection")
        buf += data
        *done, buf = buf.split(b"\n")
        for line in done:
            yield json.loads(line)


def scan(pid, port):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(3600)
    messages = lines(sock)
    sock.sendall(b'{"jsonrpc":"2.0","id":0,"method":"server.version","params":["bench","1.4"]}\n')
    next(messages)
    request = {"jsonrpc": "2.0", "id": 1, "method": "blockchain.silentpayments.subscribe",
               "params": [secrets.token_bytes(32).hex(), SPEND, 0]}
    cpu, start = cpu_seconds(pid), time.time()
    sock.sendall((json.dumps(request) + "\n").encode())
    found, notes = 0, 0
    for m in messages:
        if m.get("id") == 1 and "result" not in m:
            raise RuntimeError(f"subscribe refused: {m}")
        if m.get("method") == "blockchain.silentpayments.subscribe":
            notes += 1
            found += len(m["params"][2])
            if m["params"][1] == 1.0:
                break
    wall = time.time() - start
    used = cpu_seconds(pid) - cpu
    sock.close()
    return {"wall_s": round(wall, 3), "cpu_s": round(used, 2), "notifications": notes, "found": found}


def main():
    pid, port, runs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    for _ in range(runs):
        print(json.dumps(scan(pid, port)), flush=True)
        time.sleep(2)


if __name__ == "__main__":
    main()

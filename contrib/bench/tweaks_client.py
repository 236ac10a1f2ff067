#!/usr/bin/env python3
"""Pipelined `blockchain.block.tweaks` over one Electrum TCP connection.

usage: tweaks_client.py PORT FIRST LAST [PASSES] [--dump FILE]

Sends `server.version` (untimed), then every height FIRST..=LAST, PASSES times over, as one
pipelined stream (a writer thread sends every request while this thread reads the answers).
Prints the seconds from the first request sent to the last answer read on stdout (what
contrib/bench/lib.sh's `compare` wants) and blocks/s on stderr. Exit status 1 when an answer is
an error or the connection ends early (Cake's server aborts on a height above its tip or a block
without a tweak row: it unwraps). With --dump FILE (use PASSES 1) it writes {"height": result}
as JSON for the untimed equality check.
Answers are matched by id, so a server answering out of order is fine.
"""
import json
import socket
import sys
import threading
import time


def main():
    args = sys.argv[1:]
    dump = None
    if "--dump" in args:
        i = args.index("--dump")
        dump = args[i + 1]
        del args[i:i + 2]
    port, first, last = int(args[0]), int(args[1]), int(args[2])
    passes = int(args[3]) if len(args) > 3 else 1
    heights = list(range(first, last + 1)) * passes

    s = socket.create_connection(("127.0.0.1", port), timeout=600)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    r = s.makefile("rb", buffering=1 << 20)
    s.sendall(b'{"jsonrpc":"2.0","id":"v","method":"server.version","params":["tweaks-bench","1.4"]}\n')
    if b'"result"' not in r.readline():
        sys.exit("server.version refused")

    payload = b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"blockchain.block.tweaks","params":[%d]}\n' % (i, h)
        for i, h in enumerate(heights)
    )
    errors, first_error, answers = 0, None, {}
    start = time.perf_counter()
    writer = threading.Thread(target=s.sendall, args=(payload,), daemon=True)
    writer.start()
    for got in range(len(heights)):
        line = r.readline()
        if not line:
            sys.stderr.write("connection closed after %d of %d answers\n" % (got, len(heights)))
            sys.exit(1)
        if b'"error"' in line:
            errors += 1
            first_error = first_error or line
        if dump is not None:
            msg = json.loads(line)
            answers[heights[msg["id"]]] = msg.get("result")
    elapsed = time.perf_counter() - start
    writer.join()
    s.close()

    if dump is not None:
        with open(dump, "w") as f:
            json.dump({str(h): answers[h] for h in sorted(answers)}, f)
    sys.stderr.write("%d answers in %.3f s: %.0f blocks/s, %d errors\n"
                     % (len(heights), elapsed, len(heights) / elapsed, errors))
    if errors:
        sys.stderr.write("first error: %s" % first_error.decode(errors="replace"))
        sys.exit(1)
    print("%.4f" % elapsed)


if __name__ == "__main__":
    main()

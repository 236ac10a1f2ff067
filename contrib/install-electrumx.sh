#!/bin/sh
# Installs ElectrumX 1.20 (PyPI package `e-x`; Electrum protocol 1.4 to 1.6) into a Python venv,
# the reference server whose answers the query benchmark (contrib/bench/queries.sh) compares
# cairn's with. Needs python3 with venv and LevelDB's headers (installed here). Usage: contrib/install-electrumx.sh [DEST]
# (default /opt/electrumx). Safe to run again: does nothing once installed.
set -eu
DEST=${1:-/opt/electrumx}
if [ ! -x "$DEST/bin/electrumx_server" ]; then
  missing=""
  for pkg in libleveldb-dev python3-venv python3-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
  done
  if [ -n "$missing" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
  python3 -m venv "$DEST"
  "$DEST/bin/pip" install -q "e-x[leveldb]==1.20.0"
fi
ls "$DEST/bin/electrumx_server"

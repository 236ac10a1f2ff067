#!/bin/sh
# Installs electrs 0.11.1 (romanz/electrs, from crates.io) for the cold-start comparison
# (contrib/bench/cold-start.sh). Builds in its own target dir (RocksDB's C++ again: about 15
# minutes here). Usage: contrib/install-electrs.sh [DEST] (default /opt/electrs). Safe to run
# again: does nothing once installed.
set -eu
DEST=${1:-/opt/electrs}
if [ ! -x "$DEST/bin/electrs" ]; then
  sh "$(dirname "$0")/setup.sh"
  CARGO_TARGET_DIR=${ELECTRS_TARGET_DIR:-/var/tmp/electrs-target} \
    cargo install electrs --version 0.11.1 --locked --root "$DEST"
fi
ls "$DEST/bin/electrs"

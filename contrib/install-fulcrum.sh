#!/bin/sh
# Fulcrum 2.1.1 (the fastest Electrum server, Qt and C++), built from its source with Debian's Qt
# 5.15 and RocksDB 7.8, into DIR (default /opt/fulcrum): DIR/Fulcrum. About 6 minutes on 2 cores.
#
# Usage: contrib/install-fulcrum.sh [DIR]
# The source is GitHub's v2.1.1 archive, or FULCRUM_SRC: an unpacked source folder or a git
# repository holding the tag v2.1.1 (a mirror, where GitHub is out of reach).
#
# One source line is changed: Storage.cpp sets ReadOptions::auto_readahead_size, which RocksDB
# has only from version 9 (Fulcrum's bundled static RocksDB is 9.2); it is put under
# `#if ROCKSDB_MAJOR >= 9`. Debian's RocksDB reads ahead as Fulcrum's does without it.
set -eu
DIR=${1:-/opt/fulcrum}
[ -x "$DIR/Fulcrum" ] && exit 0
VERSION=v2.1.1
export DEBIAN_FRONTEND=noninteractive
need="qtbase5-dev qt5-qmake librocksdb-dev libzmq3-dev pkg-config g++ make"
# shellcheck disable=SC2086
dpkg -s $need >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq $need >/dev/null; }
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT INT TERM
if [ -n "${FULCRUM_SRC:-}" ] && [ -f "$FULCRUM_SRC/Fulcrum.pro" ]; then
  cp -a "$FULCRUM_SRC/." "$SRC/"
elif [ -n "${FULCRUM_SRC:-}" ]; then
  git --git-dir="$FULCRUM_SRC" archive "$VERSION" | tar -x -C "$SRC"
else
  curl -fsSL "https://github.com/cculianu/Fulcrum/archive/refs/tags/$VERSION.tar.gz" |
    tar -xz -C "$SRC" --strip-components=1
fi
cd "$SRC"
python3 - <<'PY'
import re
path = "src/Storage.cpp"
text = open(path).read()
line = "            rdOpts.auto_readahead_size = false;\n"
assert text.count(line) == 1, "Storage.cpp changed: the auto_readahead_size line is not where it was"
text = text.replace(line, "#if ROCKSDB_MAJOR >= 9\n" + line + "#endif\n")
open(path, "w").write(text)
PY
qmake Fulcrum.pro -config release >/dev/null
make -j"$(nproc)" >/dev/null
mkdir -p "$DIR"
cp Fulcrum "$DIR/Fulcrum"
"$DIR/Fulcrum" --version | head -1

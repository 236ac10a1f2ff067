#!/bin/sh
# Cake Wallet's electrs fork (cake-tech/blockstream-electrs, branch cake-update-v1, commit
# cf9e03b), the server Cake's wallets scan silent payments with, built from source with its own
# release profile (fat LTO, one codegen unit) and `--features silent-payments`, into
# CARGO_TARGET_DIR (default /var/tmp/cake-electrs-target): its release/electrs. About 11 minutes
# on 2 cores, its RocksDB 8.1.1 included. It is not on crates.io.
#
# Usage: contrib/install-cake-electrs.sh
# The sources are GitHub's archives of the two commits, or, where GitHub is out of reach, git
# directories (bare repositories or `.git` folders) holding them: CAKE_SRC (the fork) and
# SILENTPAYMENTS_SRC (cygnet3/rust-silentpayments, commit 48e2730, which the fork's Cargo.lock
# names).
#
# What is changed to build it with today's Rust: the dev-dependencies and the two test-only
# `[patch.crates-io]` git sections dropped, the silentpayments git dependency made a path one to
# its source folder (so nothing asks GitHub), rust-toolchain.toml (Rust 1.75) deleted, and `time` moved from 0.3.34 to 0.3.36
# (older `time` does not build on Rust 1.80 and later).
set -eu
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/cake-electrs-target}
[ -x "$CARGO_TARGET_DIR/release/electrs" ] && exit 0
CAKE=cf9e03b
SP=48e2730dcb7a1ff9d74bbde569df3649416eb459
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT INT TERM
mkdir "$SRC/electrs" "$SRC/silentpayments"
unpack() { # unpack REPO_DIR_OR_EMPTY GITHUB_NAME COMMIT INTO
  if [ -n "$1" ]; then
    git --git-dir="$1" archive "$3" | tar -x -C "$4"
  else
    curl -fsSL "https://github.com/$2/archive/$3.tar.gz" | tar -xz -C "$4" --strip-components=1
  fi
}
unpack "${CAKE_SRC:-}" cake-tech/blockstream-electrs "$CAKE" "$SRC/electrs"
unpack "${SILENTPAYMENTS_SRC:-}" cygnet3/rust-silentpayments "$SP" "$SRC/silentpayments"
cd "$SRC/electrs"
rm -f rust-toolchain.toml
python3 - <<'PY'
import re
path = "Cargo.toml"
text = open(path).read()
sections = re.split(r"(?m)^(?=\[)", text)
dropped = ("[dev-dependencies]", "[patch.crates-io.electrum-client]", "[patch.crates-io.electrumd]")
kept = [s for s in sections if not s.startswith(dropped)]
assert len(sections) - len(kept) == 3, "Cargo.toml changed: its dev-dependencies or patches are not where they were"
text = "".join(kept)
git = 'silentpayments = { git = "https://github.com/cygnet3/rust-silentpayments", branch = "master" }\n'
assert text.count(git) == 1, "Cargo.toml changed: the silentpayments dependency is not where it was"
text = text.replace(git, 'silentpayments = { path = "../silentpayments" }\n')
open(path, "w").write(text)
PY
cargo update --quiet -p time@0.3.34 --precise 0.3.36
cargo build --quiet --release --features silent-payments --bin electrs
"$CARGO_TARGET_DIR/release/electrs" --version 2>/dev/null | head -1 || true

#!/bin/sh
# Installs what building cairn needs on Debian 12 (as root): cmake and Boost headers for the
# embedded Bitcoin Core kernel, libclang for RocksDB's bindings, a C/C++ toolchain, and nc for
# the README's query example, curl for the BDK suite's adapter. Checks that
# cargo is recent enough. Safe to run again: it installs only what is missing.
set -eu
missing=""
for pkg in cmake libboost-dev libclang-dev build-essential pkg-config netcat-openbsd curl; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found. cairn needs Rust 1.89 or newer (rustup's stable toolchain)." >&2
  exit 1
fi
v=$(rustc --version | sed -n 's/^rustc 1\.\([0-9]*\).*/\1/p')
if [ -z "$v" ] || [ "$v" -lt 89 ]; then
  echo "setup: $(rustc --version) is too old; cairn needs Rust 1.89 or newer." >&2
  exit 1
fi

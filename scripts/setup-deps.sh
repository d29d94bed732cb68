#!/bin/sh
# Installs the Debian -dev packages kgym builds against, if pkg-config cannot
# find them.  Idempotent and quiet when everything is present.
set -e
missing=""
need() { pkg-config --exists "$1" 2>/dev/null || missing="$missing $2"; }
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
command -v cc >/dev/null 2>&1 || missing="$missing gcc"
need jansson libjansson-dev
need libmicrohttpd libmicrohttpd-dev
need sqlite3 libsqlite3-dev
need hiredis libhiredis-dev
need libcurl libcurl4-openssl-dev
need libseccomp libseccomp-dev
# SHA-256 for content keys a client controls (src/util/files.c)
need libcrypto libssl-dev
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
# The dashboard test takes a screenshot with headless Chromium.
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing="$missing chromium"
[ -z "$missing" ] && exit 0
if [ -n "$KGYM_NO_APT" ]; then
    echo "kgym: missing:$missing (KGYM_NO_APT is set: not installing)" >&2
    exit 0
fi
echo "kgym: installing Debian packages:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing make >/dev/null

#!/bin/sh
# Prepares what a lent GPU machine (no network, no Debian -dev packages) needs
# to build and test kgym's evaluator, in folders git ignores:
#   .gpu/  jansson, libcrypto (SHA-256), SQLite and hiredis (the job store) headers + static libraries, the
#          stubs, the build script
#   .kb/   KernelBench level1/level2/level3 problem files (../shared does not travel)
# Then, with the device tool: carry [".gpu", ".kb"] and run
#   export KGYM_PYTHON=$(which python3) KGYM_DEVICE=cuda KGYM_BIN=build/kgym KGYM_KERNELBENCH=$PWD/.kb
#   sh .gpu/build.sh && sh tests/integration/test_kernelbench.sh
# The device build leaves out the HTTP service and the agent (libmicrohttpd and libcurl are not there).
#
#   sh scripts/gpu-prepare.sh [--baseline COMMIT]
#
# --baseline COMMIT also puts that commit's sources in .gpu/base (src, include, harness, policy): on the GPU
# machine `sh .gpu/build.sh .gpu/base` builds .gpu/base/build/kgym, with its own harness, for
# bench/throughput_paired.sh.
set -e
cd "$(dirname "$0")/.."
BASELINE=
case ${1:-} in
--baseline)
    [ $# -ge 2 ] || { echo "gpu-prepare: --baseline needs a commit" >&2; exit 2; }
    BASELINE=$2 ;;
"") ;;
*) echo "gpu-prepare: unknown argument $1 (usage: sh scripts/gpu-prepare.sh [--baseline COMMIT])" >&2; exit 2 ;;
esac
KB=${KGYM_KERNELBENCH:-../shared/kernelbench}
mkdir -p .gpu/include .gpu/lib .kb .git/info
cp /usr/include/jansson.h /usr/include/jansson_config.h .gpu/include/
cp "$(pkg-config --variable=libdir jansson)/libjansson.a" .gpu/lib/
cp -r /usr/include/openssl .gpu/include/
for d in /usr/include/*-linux-gnu/openssl; do [ -d "$d" ] && cp "$d"/*.h .gpu/include/openssl/; done
cp "$(pkg-config --variable=libdir libcrypto)/libcrypto.a" .gpu/lib/
# The job store (bench runs on the service's worker pool over a memory store; the store's other backends are
# linked in with it): SQLite's and hiredis's headers and static libraries.
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h .gpu/include/
cp -r /usr/include/hiredis .gpu/include/
cp "$(cc -print-file-name=libsqlite3.a)" "$(cc -print-file-name=libhiredis.a)" .gpu/lib/  # hiredis.pc names the wrong libdir on Debian
cp scripts/gpu-stubs.c .gpu/stubs.c
cp -r "$KB/level1" "$KB/level2" "$KB/level3" .kb/
cat > .gpu/build.sh <<'EOS'
#!/bin/sh
# sh .gpu/build.sh [DIR]: builds DIR/build/kgym (DIR: this checkout, or a baseline's sources in .gpu/base).
set -e
G=$(pwd)/.gpu
cd "${1:-.}"
mkdir -p build
R=$(pwd)
gcc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Iinclude -Isrc -I"$G/include" \
  -DKG_DEFAULT_HARNESS_DIR="\"$R/harness\"" -DKG_DEFAULT_PYTHON="\"$KGYM_PYTHON\"" -DKG_SOURCE_ROOT="\"$R\"" \
  $(ls src/*/*.c | grep -vE 'src/(server|agent)/|cmd_serve|cmd_rollout') "$G/stubs.c" \
  "$G/lib/libjansson.a" "$G/lib/libcrypto.a" "$G/lib/libsqlite3.a" "$G/lib/libhiredis.a" -lm -lpthread -ldl \
  -o build/kgym
echo "built $R/build/kgym"
EOS
if [ -n "$BASELINE" ]; then
    rm -rf .gpu/base && mkdir -p .gpu/base
    git archive "$BASELINE" src include harness policy | tar -x -C .gpu/base
    echo "baseline $BASELINE in .gpu/base (build it there with: sh .gpu/build.sh .gpu/base)"
fi
for d in /.gpu/ /.kb/; do grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude; done
echo "ready: carry .gpu and .kb"

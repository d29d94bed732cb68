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
#   sh scripts/gpu-prepare.sh [--baseline COMMIT] [--fleet]
#
# --baseline COMMIT also puts that commit's sources in .gpu/base (src, include, harness, policy): on the GPU
# machine `sh .gpu/build.sh .gpu/base` builds .gpu/base/build/kgym, with its own harness, for
# bench/throughput_paired.sh.
#
# --fleet also carries what bench/fleet.sh (a Redis fleet on the GPU machine, issue 38) needs: libmicrohttpd's
# header and static library (the service: `kgym serve`, `kgym worker`; the agent, libcurl, stays out) with stubs
# for the GnuTLS it refers to (scripts/gpu-tls-stubs.c: kgym never turns TLS on), and redis-server with the
# shared libraries it needs beside it (.gpu/redis: bin/, lib/ and a wrapper, .gpu/redis/redis-server, that uses the
# machine's own copy of each library where it has a working one and the carried copy otherwise).  The fleet build
# is linked here once, from .gpu only, and the carried redis-server started, so a missing piece shows here and not
# on the GPU.  On the GPU machine:
#   export KGYM_PYTHON=$(which python3) KGYM_BIN=build/kgym KGYM_KERNELBENCH=$PWD/.kb
#   sh .gpu/build.sh --fleet && sh bench/fleet.sh --gpus 0,1 --kill --keep $OUT/fleet
# (bench/fleet.sh finds .gpu/redis/redis-server itself when no redis-server is on PATH; about 6 minutes on two
# H200s: 16 tasks x 8 samples on one GPU, on two, then 64 jobs with a worker process killed.)
set -e
cd "$(dirname "$0")/.."
BASELINE=
FLEET=
while [ $# -gt 0 ]; do
    case $1 in
    --baseline)
        [ $# -ge 2 ] || { echo "gpu-prepare: --baseline needs a commit" >&2; exit 2; }
        BASELINE=$2
        shift 2 ;;
    --fleet) FLEET=1 && shift ;;
    *) echo "gpu-prepare: unknown argument $1 (usage: sh scripts/gpu-prepare.sh [--baseline COMMIT] [--fleet])" >&2
       exit 2 ;;
    esac
done
KB=${KGYM_KERNELBENCH:-../shared/kernelbench}
mkdir -p .gpu/include .gpu/lib .kb
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
# sh .gpu/build.sh [--fleet] [--out FILE] [DIR]: builds DIR/build/kgym (DIR: this checkout, or a baseline's
# sources in .gpu/base).  --fleet compiles the service too (kgym serve, kgym worker: bench/fleet.sh) against the
# libmicrohttpd that `sh scripts/gpu-prepare.sh --fleet` carried; the agent (kgym rollout, libcurl) stays out.
# --out FILE writes the binary there instead.
set -e
G=$(pwd)/.gpu
FLEET=
OUT=
while [ $# -gt 0 ]; do
    case $1 in
    --fleet) FLEET=1 && shift ;;
    --out) [ $# -ge 2 ] || { echo "build.sh: --out needs a file" >&2; exit 2; }; OUT=$2 && shift 2 ;;
    *) break ;;
    esac
done
case $OUT in "" | /*) ;; *) OUT=$(pwd)/$OUT ;; esac
cd "${1:-.}"
R=$(pwd)
[ -n "$OUT" ] || { mkdir -p build && OUT=$R/build/kgym; }
LEAVE='src/(server|agent)/|cmd_serve|cmd_rollout'
EXTRA=
if [ -n "$FLEET" ]; then
    [ -f "$G/lib/libmicrohttpd.a" ] && [ -f "$G/tls-stubs.c" ] || {
        echo "build.sh --fleet: no libmicrohttpd in .gpu: run sh scripts/gpu-prepare.sh --fleet where the -dev packages are" >&2
        exit 1
    }
    LEAVE='src/agent/|cmd_rollout'
    EXTRA="-DKG_FLEET $G/tls-stubs.c $G/lib/libmicrohttpd.a"
fi
gcc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Iinclude -Isrc -I"$G/include" \
  -DKG_DEFAULT_HARNESS_DIR="\"$R/harness\"" -DKG_DEFAULT_PYTHON="\"$KGYM_PYTHON\"" -DKG_SOURCE_ROOT="\"$R\"" \
  $(ls src/*/*.c | grep -vE "$LEAVE") "$G/stubs.c" $EXTRA \
  "$G/lib/libjansson.a" "$G/lib/libcrypto.a" "$G/lib/libsqlite3.a" "$G/lib/libhiredis.a" -lm -lpthread -ldl \
  -o "$OUT"
echo "built $OUT${FLEET:+ (with kgym serve and kgym worker)}"
EOS
if [ -n "$BASELINE" ]; then
    rm -rf .gpu/base && mkdir -p .gpu/base
    git archive "$BASELINE" src include harness policy | tar -x -C .gpu/base
    echo "baseline $BASELINE in .gpu/base (build it there with: sh .gpu/build.sh .gpu/base)"
fi
if [ -n "$FLEET" ]; then
    cp /usr/include/microhttpd.h .gpu/include/
    cp "$(pkg-config --variable=libdir libmicrohttpd)/libmicrohttpd.a" .gpu/lib/
    cp scripts/gpu-tls-stubs.c .gpu/tls-stubs.c
    # redis-server and every shared library it loads but glibc's own (the GPU machine has a glibc; bin/ and lib/
    # keep the names the binary asks for).  /usr/bin/redis-server is a link: the binary picks its role by name.
    R=$(command -v redis-server) || { echo "gpu-prepare: no redis-server here (apt-get install redis-server)" >&2; exit 1; }
    rm -rf .gpu/redis && mkdir -p .gpu/redis/bin .gpu/redis/lib
    cp -L "$R" .gpu/redis/bin/redis-server
    ldd "$R" | awk '/=> \// { print $3 }' |
        grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl)\.so|/ld-linux' |
        while read -r lib; do cp -L "$lib" .gpu/redis/lib/; done
    cat > .gpu/redis/redis-server <<'EOS'
#!/bin/sh
# redis-server as scripts/gpu-prepare.sh --fleet carried it.  Each shared library comes from this machine where it
# has one that loads (a system copy matches its glibc), else from lib/ beside this file: the libraries still missing
# are linked into use/ and put on LD_LIBRARY_PATH for redis-server alone, until nothing is missing.
D=$(cd "$(dirname "$0")" && pwd)
rm -rf "$D/use" && mkdir -p "$D/use"
chmod +x "$D/bin/redis-server" 2>/dev/null # in case the copy lost its mode
if ! command -v ldd >/dev/null 2>&1; then # nothing to ask: every carried library
    for l in "$D"/lib/*; do ln -s "../lib/${l##*/}" "$D/use/${l##*/}"; done
fi
i=0
while [ $i -lt 8 ] && command -v ldd >/dev/null 2>&1; do
    # "libX.so.N => not found", or "/path/libX.so.N: version `V' not found (required by ...)"
    need=$(LD_LIBRARY_PATH="$D/use" ldd "$D/bin/redis-server" 2>&1 |
        sed -n -e 's/^[[:space:]]*\([^ ]*\) => not found.*/\1/p' -e 's/^[[:space:]]*\([^ :]*\): version .* not found.*/\1/p' |
        sed 's,.*/,,' | sort -u)
    added=
    for n in $need; do
        [ -e "$D/use/$n" ] || { [ -e "$D/lib/$n" ] && ln -s "../lib/$n" "$D/use/$n" && added=1; }
    done
    [ -n "$added" ] || break
    i=$((i + 1))
done
LD_LIBRARY_PATH="$D/use${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
exec "$D/bin/redis-server" "$@"
EOS
    chmod +x .gpu/redis/redis-server
    # A missing piece shows here, not on the GPU: the fleet build links from .gpu alone, the carried Redis starts.
    tmp=$(mktemp -d)
    sh .gpu/build.sh --fleet --out "$tmp/kgym" >/dev/null
    "$tmp/kgym" worker --help >/dev/null && "$tmp/kgym" serve --help >/dev/null ||
        { echo "gpu-prepare: the fleet build has no kgym serve/worker" >&2; exit 1; }
    other=$(ldd "$tmp/kgym" | awk '/=>/ { print $1 }' | grep -vE '^(libc|libm|libpthread|libdl|librt)\.so' || true)
    [ -z "$other" ] || { echo "gpu-prepare: the fleet build needs shared libraries the GPU machine lacks: $other" >&2; exit 1; }
    rm -rf "$tmp"
    sh .gpu/redis/redis-server --version >/dev/null || { echo "gpu-prepare: the carried redis-server does not start" >&2; exit 1; }
    rm -rf .gpu/redis/use
    need() { objdump -T "$@" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1; }
    echo "fleet: libmicrohttpd (the fleet build links from .gpu alone); .gpu/redis, $(du -sh .gpu/redis | cut -f1):" \
        "redis-server needs $(need .gpu/redis/bin/redis-server) or newer, the carried libraries up to" \
        "$(need .gpu/redis/lib/*) (where the machine has a copy that loads, it is used instead)"
fi
exclude=$(git rev-parse --git-path info/exclude) # .git is a file in a worktree
mkdir -p "$(dirname "$exclude")"
for d in /.gpu/ /.kb/; do grep -qx "$d" "$exclude" 2>/dev/null || echo "$d" >> "$exclude"; done
echo "ready: carry .gpu and .kb"

#!/bin/sh
# Prepares what a lent GPU machine (no network, no Debian -dev packages) needs
# to build and test kgym's evaluator, in folders git ignores:
#   .gpu/  jansson and libcrypto (SHA-256 in src/util/files.c) headers + static libraries, the stubs, the
#          build script
#   .kb/   KernelBench level1/level2 problem files (../shared does not travel)
# Then, with the device tool: carry [".gpu", ".kb"] and run
#   export KGYM_PYTHON=$(which python3) KGYM_DEVICE=cuda KGYM_BIN=build/kgym KGYM_KERNELBENCH=$PWD/.kb
#   sh .gpu/build.sh && sh tests/integration/test_kernelbench.sh
# The device build leaves out the service and the agent (their libraries are not there).
set -e
cd "$(dirname "$0")/.."
KB=${KGYM_KERNELBENCH:-../shared/kernelbench}
mkdir -p .gpu/include .gpu/lib .kb .git/info
cp /usr/include/jansson.h /usr/include/jansson_config.h .gpu/include/
cp "$(pkg-config --variable=libdir jansson)/libjansson.a" .gpu/lib/
cp -r /usr/include/openssl .gpu/include/
for d in /usr/include/*-linux-gnu/openssl; do [ -d "$d" ] && cp "$d"/*.h .gpu/include/openssl/; done
cp "$(pkg-config --variable=libdir libcrypto)/libcrypto.a" .gpu/lib/
cp scripts/gpu-stubs.c .gpu/stubs.c
cp -r "$KB/level1" "$KB/level2" .kb/
cat > .gpu/build.sh <<'EOS'
#!/bin/sh
set -e
mkdir -p build
R=$(pwd)
gcc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Iinclude -Isrc -I.gpu/include \
  -DKG_DEFAULT_HARNESS_DIR="\"$R/harness\"" -DKG_DEFAULT_PYTHON="\"$KGYM_PYTHON\"" -DKG_SOURCE_ROOT="\"$R\"" \
  $(ls src/*/*.c | grep -vE 'src/(server|store|sched|agent)/|cmd_serve|cmd_rollout') .gpu/stubs.c \
  .gpu/lib/libjansson.a .gpu/lib/libcrypto.a -lm -lpthread -ldl -o build/kgym
echo built build/kgym
EOS
for d in /.gpu/ /.kb/; do grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude; done
echo "ready: carry .gpu and .kb"

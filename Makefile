# kgym — build, set-up, run and test.
#
#   make run       set up everything, build, and benchmark the bundled examples
#   make test      set up everything, build with ASan/UBSan, run every test
#   make           build build/kgym only (needs the -dev packages; see `make deps`)
#
# Set-up is idempotent: `make deps` apt-gets the -dev packages that pkg-config
# cannot find, `make python` makes .venv with harness/requirements.txt unless
# KGYM_PYTHON names an existing interpreter that has torch and triton.

CC      ?= cc
PKGS    := jansson libmicrohttpd sqlite3 hiredis libcurl libseccomp libcrypto
# Recursive (=) on purpose: pkg-config must run after `make deps` installed them.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))

KGYM_PYTHON ?=
PYTHON_DEFAULT := $(if $(KGYM_PYTHON),$(KGYM_PYTHON),$(CURDIR)/.venv/bin/python)

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
DEFS     := -D_GNU_SOURCE -DKG_DEFAULT_HARNESS_DIR='"$(CURDIR)/harness"' \
            -DKG_DEFAULT_PYTHON='"$(PYTHON_DEFAULT)"' -DKG_SOURCE_ROOT='"$(CURDIR)"'
# -fvisibility=hidden: only what include/kgym/ marks KG_API leaves
# build/libkgym.so (kgym/export.h).  Function and data sections let the
# library's link drop what its public API does not reach.
BASE_CFLAGS = -std=c11 $(WARN) $(DEFS) -Iinclude -Isrc $(PKG_CFLAGS) -fPIC \
              -fvisibility=hidden -ffunction-sections -fdata-sections
LIBS        = $(PKG_LIBS) -lm -lpthread
# build/libkgym.so is the public API (include/kgym/: rl.h, extract.h,
# error.h) for Python's ctypes binding: built from only the folders that API
# needs, it links none of the service's libraries (HTTP, SQLite, Redis, curl,
# seccomp).  libcrypto is left out too: its one user in these folders
# (util's SHA-256) is unreachable from the API, so --gc-sections drops it,
# and --no-undefined fails the link loudly if the API ever reaches it.
PUB_PKGS    := jansson
PUB_LIBS     = $(shell pkg-config --libs $(PUB_PKGS)) -lm

RELEASE_CFLAGS := -O2 -g
ASAN_CFLAGS    := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
                  -fno-sanitize-recover=all

LIB_SRC   := $(filter-out src/cli/main.c,$(wildcard src/*/*.c))
PUB_SRC   := $(wildcard src/rl/*.c src/extract/*.c src/util/*.c)
CLI_MAIN  := src/cli/main.c
TEST_SRC  := $(wildcard tests/unit/test_*.c)

REL_OBJ   := $(LIB_SRC:%.c=build/release/%.o)
PUB_OBJ   := $(PUB_SRC:%.c=build/release/%.o)
ASAN_OBJ  := $(LIB_SRC:%.c=build/asan/%.o)
TEST_BIN  := $(TEST_SRC:tests/unit/%.c=build/asan/tests/%)
HEADERS   := $(wildcard include/kgym/*.h src/*/*.h src/*/*.def tests/unit/*.h)

.PHONY: all build deps python run test unit integration clean gpu-test help

all: build
build: build/kgym build/libkgym.so

help:
	@sed -n '1,12p' Makefile

deps:
	@sh scripts/setup-deps.sh

python:
	@sh scripts/setup-python.sh

build/release/%.o: %.c $(HEADERS) | deps
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(BASE_CFLAGS) $(RELEASE_CFLAGS) -c $< -o $@

build/asan/%.o: %.c $(HEADERS) | deps
	@mkdir -p $(dir $@)
	@echo "  CC asan $<"
	@$(CC) $(BASE_CFLAGS) $(ASAN_CFLAGS) -c $< -o $@

build/kgym: $(REL_OBJ) build/release/$(CLI_MAIN:.c=.o)
	@echo "  LD      $@"
	@$(CC) $(RELEASE_CFLAGS) -o $@ $^ $(LIBS)

build/libkgym.so: $(PUB_OBJ)
	@echo "  LD      $@"
	@$(CC) -shared -Wl,--no-undefined -Wl,--gc-sections \
	    -o $@ $^ $(PUB_LIBS)

build/asan/kgym: $(ASAN_OBJ) build/asan/$(CLI_MAIN:.c=.o)
	@echo "  LD asan $@"
	@$(CC) $(ASAN_CFLAGS) -o $@ $^ $(LIBS)

build/asan/tests/%: tests/unit/%.c $(ASAN_OBJ) $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  LD test $@"
	@$(CC) $(BASE_CFLAGS) $(ASAN_CFLAGS) -Itests/unit -o $@ $< $(ASAN_OBJ) $(LIBS)

# The main job: evaluate every bundled example on the best device present.
run: deps python build
	KGYM_PYTHON=$(PYTHON_DEFAULT) ./build/kgym bench examples

test: deps python build build/asan/kgym $(TEST_BIN)
	@KGYM_PYTHON=$(PYTHON_DEFAULT) sh tests/run.sh

unit: build/asan/kgym $(TEST_BIN)
	@KGYM_PYTHON=$(PYTHON_DEFAULT) KGYM_ONLY_UNIT=1 sh tests/run.sh

# On a GPU machine: the integration suites in CUDA mode with the release
# binary (see README; set KGYM_PYTHON to the machine's Python).
gpu-test: deps python build
	@KGYM_PYTHON=$(PYTHON_DEFAULT) KGYM_DEVICE=cuda KGYM_BIN=build/kgym KGYM_SUITES=integration sh tests/run.sh

clean:
	rm -rf build

# The Python side of the lists of kinds (verdicts, stages, protocol messages, findings): generated from the C
# lists and committed; harness/tests/test_kinds.py fails when they are stale.
KINDS_LISTS := src/eval/kinds.def include/kgym/rl.h
.PHONY: kinds
kinds: $(KINDS_LISTS) scripts/gen_kinds.py
	@python3 scripts/gen_kinds.py

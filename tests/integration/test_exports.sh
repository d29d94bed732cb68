#!/bin/sh
# test_exports.sh — build/libkgym.so exports exactly the public API: every
# function declared in include/kgym/*.h (read by the compiler, gcc -aux-info,
# not by a pattern) and nothing else, so an internal kg_* function cannot leak
# and a public declaration without KG_API cannot go missing; and the library
# that Python's ctypes binding loads links none of the service's libraries.
# Last line: "N passed, N failed".
. "$(dirname "$0")/lib.sh"
LIB=${KGYM_LIB:-build/libkgym.so}
CC=${CC:-cc}

if [ ! -f "$LIB" ]; then
    bad "$LIB is not built (make build)"; finish; exit 1
fi

# The declared public functions: one translation unit that includes every
# public header; -aux-info writes each prototype with the file it came from.
for h in include/kgym/*.h; do echo "#include \"${h#include/}\""; done >"$TMP/pub.c"
if "$CC" -std=c11 -D_GNU_SOURCE -Iinclude -fsyntax-only -aux-info "$TMP/aux" "$TMP/pub.c" 2>"$TMP/cc.err"; then
    grep '^/\* include/kgym/' "$TMP/aux" | sed -E 's/^.*[ *]([A-Za-z_][A-Za-z0-9_]*) \(.*$/\1/' \
        | sort -u >"$TMP/declared"
    n=$(wc -l <"$TMP/declared")
    if [ "$n" -ge 50 ]; then ok "include/kgym declares $n functions"
    else bad "include/kgym declares only $n functions: the reading of -aux-info broke" "$(head "$TMP/aux")"; fi
else
    bad "$CC -aux-info over include/kgym failed (needs gcc)" "$(cat "$TMP/cc.err")"
    : >"$TMP/declared"
fi

nm -D --defined-only "$LIB" | awk '{print $3}' | sort -u >"$TMP/exported"

leaked=$(comm -13 "$TMP/declared" "$TMP/exported")
if [ -z "$leaked" ]; then ok "every exported symbol is declared in include/kgym"
else bad "exported but not declared in include/kgym ($(echo "$leaked" | wc -l)):" "$leaked"; fi

missing=$(comm -23 "$TMP/declared" "$TMP/exported")
if [ -z "$missing" ]; then ok "every public declaration is exported (KG_API)"
else bad "declared in include/kgym but not exported (KG_API missing?):" "$missing"; fi

# What the Python binding binds (its _SIGNATURES table) must be among them:
# here a missing one is named, where ctypes would stop at the first.
grep -o '^ *"kg_[a-z0-9_]*":' python/kgym/rl.py | tr -d ' ":' | sort -u >"$TMP/used"
unexported=$(comm -23 "$TMP/used" "$TMP/exported")
if [ -s "$TMP/used" ] && [ -z "$unexported" ]; then ok "python/kgym/rl.py's $(wc -l <"$TMP/used") functions are exported"
else bad "python/kgym/rl.py calls functions the library does not export:" "$unexported"; fi

needed=$(readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
service=$(echo "$needed" | grep -E 'microhttpd|sqlite|hiredis|curl|seccomp')
if [ -n "$needed" ] && [ -z "$service" ]; then ok "NEEDED has no service library: $(echo $needed)"
else bad "$LIB links service libraries:" "$needed"; fi

finish

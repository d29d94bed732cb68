#!/bin/sh
# A baseline build whose evaluations each compile into a Triton cache of their own, as kgym's runners do.
#
#   sh bench/profile/own_cache_baseline.sh BASE_DIR OUT_DIR
#
# BASE_DIR is a baseline's tree built by `sh .gpu/build.sh .gpu/base` (scripts/gpu-prepare.sh --baseline
# COMMIT).  Builds before the trusted judge (c5d44a4) compiled every evaluation into one Triton cache, so an
# evaluation of a candidate seen earlier in a run compiled nothing: a cache kgym refuses by design (what one
# candidate's process writes must not reach another evaluation; docs/threat-model.md).  This copies BASE_DIR's
# harness (and its policy, read beside it) into OUT_DIR, points TRITON_CACHE_DIR at the evaluation's own
# workdir right where the child enters it, and writes OUT_DIR/kgym, which runs BASE_DIR's binary with that
# harness.  Pass OUT_DIR/kgym to
# bench/throughput_paired.sh as the baseline to compare kgym with the baseline's speed under kgym's isolation.
set -eu
[ $# -eq 2 ] || { sed -n '2,/^set -eu/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }
BASE=$(cd "$1" && pwd)
OUT=$2
[ -x "$BASE/build/kgym" ] || { echo "own_cache_baseline: no $BASE/build/kgym (build it with sh .gpu/build.sh $1)" >&2; exit 1; }
# The judge's module: kgym_harness/child.py before the judge/runner/shared split, kgym_harness/judge/child.py after.
CHILD=harness/kgym_harness/child.py
[ -f "$BASE/$CHILD" ] || CHILD=harness/kgym_harness/judge/child.py
ANCHOR='        os.chdir(job["workdir"])'
n=$(grep -cxF "$ANCHOR" "$BASE/$CHILD" || true)
[ "$n" = 1 ] || { echo "own_cache_baseline: $BASE/$CHILD has $n lines '$ANCHOR' (1 expected): not a tree this script knows" >&2; exit 1; }
rm -rf "$OUT" && mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cp -R "$BASE/harness" "$OUT/harness"
cp -R "$BASE/policy" "$OUT/policy" # the build reads its policy beside its harness
"${PYTHON:-python3}" - "$OUT/$CHILD" "$ANCHOR" <<'PY'
import sys
path, anchor = sys.argv[1], sys.argv[2]
src = open(path).read()
pin = anchor + '\n        os.environ["TRITON_CACHE_DIR"] = os.path.join(job["workdir"], ".triton-cache")'
open(path, "w").write(src.replace(anchor + "\n", pin + "\n", 1))
PY
cat >"$OUT/kgym" <<EOS
#!/bin/sh
# $BASE/build/kgym with a Triton cache per evaluation (bench/profile/own_cache_baseline.sh)
KGYM_HARNESS="$OUT/harness" exec "$BASE/build/kgym" "\$@"
EOS
chmod +x "$OUT/kgym"
echo "own_cache_baseline: $OUT/kgym runs $BASE/build/kgym with a Triton cache per evaluation"

"""kgym.rl — the RL library of kgym (include/kgym/rl.h) for Python trainers.

A thin ctypes layer over build/libkgym.so: nothing is compiled at install
time.  The shared library is found through the environment variable KGYM_LIB
or at <repository>/build/libkgym.so (run `make` first).  Functions take lists
or NumPy arrays and return NumPy arrays; every C error becomes a KgymError
carrying the library's message.  Formulas and defaults: docs/rl.md.

    from kgym import rl
    adv, ret = rl.advantages(prompt, sample, reward, turn=turn, estimator="trloo")
    r = rl.reward(results, fn="drkernel")          # results: kgym eval JSON dicts
    report = rl.metrics(records)                   # Fast@p per turn and best-of-turns
"""

import ctypes
import json
import math
import os
from ctypes import POINTER, c_char, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t
from ctypes import c_uint8, c_uint64, c_void_p
from pathlib import Path

import numpy as np

__all__ = [
    "KgymError", "VERDICTS", "REWARD_FUNCTIONS", "ESTIMATORS", "load_library", "outcomes",
    "reward", "advantages", "group_filter", "prs_keep_probability", "prs_sample", "mrs_filter",
    "truncated_is_weights", "curriculum_schedule", "Curriculum", "metrics", "metrics_table",
    "metrics_svg",
]

from .kinds import VERDICTS  # generated from include/kgym/rl.h's KG_VERDICT_MAP (scripts/gen_kinds.py)

REWARD_FUNCTIONS = ("drkernel", "staged", "tritonrl", "speedup")
ESTIMATORS = ("grpo", "rloo", "trloo")
IS_LEVELS = ("token", "turn", "sequence")
_MAX_LEVELS = 8
_MAX_THRESHOLDS = 16


class KgymError(Exception):
    """An error reported by libkgym (bad input, out of memory, ...)."""


# ------------------------------------------------------------------ ctypes types

class _Error(ctypes.Structure):
    _fields_ = [("code", c_int), ("message", c_char * 1024)]


class _Rng(ctypes.Structure):
    _fields_ = [("s", c_uint64 * 4)]


class _Columns(ctypes.Structure):
    _fields_ = [("n", c_size_t), ("verdict", POINTER(c_int32)), ("hacked", POINTER(c_uint8)),
                ("staged_reward", POINTER(c_double)), ("speedup", POINTER(c_double)),
                ("coverage", POINTER(c_double))]


class _RewardConfig(ctypes.Structure):
    _fields_ = [("fn", c_int), ("correct_weight", c_double), ("speed_weight", c_double),
                ("speedup_cap", c_double), ("speedup_lower_bound", c_double),
                ("coverage_weight", c_double), ("failure_reward", c_double),
                ("hack_penalty", c_double), ("timeout_penalty", c_double),
                ("regression_penalty", c_double)]


class _AdvantageConfig(ctypes.Structure):
    _fields_ = [("estimator", c_int), ("gamma", c_double), ("normalize_std", c_int),
                ("std_eps", c_double), ("singleton", c_int), ("masked_reward", c_int),
                ("rejected", c_int), ("small_std", c_int)]


class _GroupFilterConfig(ctypes.Structure):
    _fields_ = [("min_std", c_double), ("min_group_size", c_size_t)]


class _PrsConfig(ctypes.Structure):
    _fields_ = [("mode", c_int), ("threshold", c_double), ("factor", c_double),
                ("speedup_threshold", c_double)]


class _PrsStats(ctypes.Structure):
    _fields_ = [("total", c_size_t), ("kept", c_size_t), ("correct", c_size_t),
                ("correct_kept", c_size_t), ("acceptance_rate", c_double),
                ("correct_acceptance_rate", c_double), ("expected_correct_kept", c_double)]


class _MrsConfig(ctypes.Structure):
    _fields_ = [("mode", c_int), ("delta", c_double), ("veto_threshold", c_double)]


class _MrsStats(ctypes.Structure):
    _fields_ = [("trajectories", c_size_t), ("trajectories_kept", c_size_t),
                ("turns", c_size_t), ("turns_kept", c_size_t), ("turns_vetoed", c_size_t)]


class _Ramp(ctypes.Structure):
    _fields_ = [("start_share", c_double), ("end_share", c_double),
                ("target_accuracy", c_double)]


class _CurriculumConfig(ctypes.Structure):
    _fields_ = [("n_levels", c_size_t), ("level", _Ramp * _MAX_LEVELS), ("window", c_size_t),
                ("rule", c_int), ("step", c_double), ("step_window", c_size_t),
                ("min_steps", c_size_t)]


class _MetricsReport(ctypes.Structure):
    _fields_ = [("n_thresholds", c_size_t), ("thresholds", c_double * _MAX_THRESHOLDS),
                ("samples", c_size_t), ("n_turns", c_size_t), ("per_turn", c_void_p),
                ("best_of", c_void_p)]


_P_DOUBLE, _P_I64, _P_I32, _P_U8 = POINTER(c_double), POINTER(c_int64), POINTER(c_int32), \
    POINTER(c_uint8)
_P_ERR = POINTER(_Error)

_SIGNATURES = {
    "kg_reward_config_default": (None, [POINTER(_RewardConfig), c_int]),
    "kg_reward_config_set": (c_int, [POINTER(_RewardConfig), c_char_p, c_double, _P_ERR]),
    "kg_reward_batch": (c_int, [POINTER(_RewardConfig), POINTER(_Columns), _P_I64, _P_I32,
                                _P_DOUBLE, _P_ERR]),
    "kg_advantage_config_default": (None, [POINTER(_AdvantageConfig), c_int]),
    "kg_advantages": (c_int, [POINTER(_AdvantageConfig), c_size_t, _P_I64, _P_I64, _P_I32,
                              _P_DOUBLE, _P_U8, _P_U8, _P_DOUBLE, _P_DOUBLE, _P_ERR]),
    "kg_group_filter": (c_int, [POINTER(_GroupFilterConfig), c_size_t, _P_I64, _P_DOUBLE, _P_U8,
                                POINTER(c_size_t), _P_ERR]),
    "kg_rl_option_parse": (c_int, [c_int, c_char_p, POINTER(c_int), _P_ERR]),
    "kg_rng_seed": (None, [POINTER(_Rng), c_uint64]),
    "kg_prs_config_default": (None, [POINTER(_PrsConfig)]),
    "kg_prs_sample": (c_int, [POINTER(_PrsConfig), POINTER(_Rng), POINTER(_Columns), _P_I64,
                              _P_U8, _P_U8,
                              _P_DOUBLE, POINTER(_PrsStats), _P_ERR]),
    "kg_mrs_config_default": (None, [POINTER(_MrsConfig)]),
    "kg_mrs_filter": (c_int, [POINTER(_MrsConfig), c_size_t, _P_I64, _P_I64, _P_DOUBLE, _P_U8,
                              _P_U8, _P_DOUBLE, _P_U8, POINTER(_MrsStats), _P_ERR]),
    "kg_truncated_is_weights": (c_int, [c_double, c_int, c_size_t, _P_I64, _P_I64, _P_DOUBLE,
                                        _P_DOUBLE, _P_ERR]),
    "kg_curriculum_config_default": (None, [POINTER(_CurriculumConfig)]),
    "kg_curriculum_schedule": (c_int, [POINTER(_CurriculumConfig), _P_DOUBLE, _P_DOUBLE,
                                       _P_ERR]),
    "kg_curriculum_create": (c_int, [POINTER(_CurriculumConfig), c_uint64, POINTER(c_void_p),
                                     _P_ERR]),
    "kg_curriculum_free": (None, [c_void_p]),
    "kg_curriculum_record": (c_int, [c_void_p, c_size_t, c_int, _P_ERR]),
    "kg_curriculum_end_step": (c_int, [c_void_p, _P_ERR]),
    "kg_curriculum_accuracy": (c_double, [c_void_p, c_size_t]),
    "kg_curriculum_observed": (c_size_t, [c_void_p, c_size_t]),
    "kg_curriculum_shares": (c_int, [c_void_p, _P_DOUBLE, _P_ERR]),
    "kg_curriculum_sample_level": (c_int, [c_void_p, POINTER(c_size_t), _P_ERR]),
    "kg_curriculum_sample_index": (c_int, [c_void_p, c_size_t, POINTER(c_size_t), _P_ERR]),
    "kg_curriculum_save": (c_int, [c_void_p, POINTER(c_void_p), _P_ERR]),
    "kg_curriculum_load": (c_int, [c_char_p, POINTER(c_void_p), _P_ERR]),
    "kg_curriculum_get_config": (POINTER(_CurriculumConfig), [c_void_p]),
    "kg_metrics_compute": (c_int, [POINTER(_Columns), _P_I64, _P_I32, _P_DOUBLE, c_size_t,
                                   POINTER(_MetricsReport), _P_ERR]),
    "kg_metrics_report_free": (None, [POINTER(_MetricsReport)]),
    "kg_metrics_json": (c_int, [POINTER(_MetricsReport), POINTER(c_void_p), _P_ERR]),
    "kg_metrics_table": (c_int, [POINTER(_MetricsReport), POINTER(c_void_p), _P_ERR]),
    "kg_metrics_svg": (c_int, [POINTER(_MetricsReport), POINTER(c_void_p), _P_ERR]),
}

_lib = None
_libc = None


def load_library(path=None):
    """Loads libkgym (once): `path`, $KGYM_LIB, or <repo>/build/libkgym.so."""
    global _lib, _libc
    if _lib is not None and path is None:
        return _lib
    candidates = [path, os.environ.get("KGYM_LIB"),
                  str(Path(__file__).resolve().parents[2] / "build" / "libkgym.so")]
    chosen = next((c for c in candidates if c), None)
    if not chosen or not os.path.exists(chosen):
        raise KgymError(f"libkgym not found at {chosen}: run `make` or set KGYM_LIB")
    lib = ctypes.CDLL(chosen)
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    # strings the C side returns through char ** are malloc'd: free with libc
    _libc = ctypes.CDLL(None)
    _libc.free.argtypes, _libc.free.restype = [c_void_p], None
    _lib = lib
    return lib


def _check(rc, err):
    if rc != 0:
        raise KgymError(err.message.decode("utf-8", "replace"))


def _take_string(ptr):
    try:
        return ctypes.string_at(ptr.value).decode("utf-8")
    finally:
        _libc.free(ptr)


def _f64(values, n=None, name="array"):
    arr = np.ascontiguousarray(np.asarray(values, dtype=np.float64))
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        raise KgymError(f"{name} must be one-dimensional with {n} entries")
    return arr


def _ptr(arr, ctype):
    return arr.ctypes.data_as(POINTER(ctype))


def _dense_ids(keys):
    """Dense int64 ids for any hashable keys (strings, ints, tuples)."""
    ids, table = np.empty(len(keys), dtype=np.int64), {}
    for i, k in enumerate(keys):
        ids[i] = table.setdefault(k.item() if isinstance(k, np.generic) else k, len(table))
    return ids


# --------------------------------------------------------------------- outcomes

def _result_of(record):
    if isinstance(record.get("result"), dict):
        return record["result"]
    if "verdict" in record:
        return record
    raise KgymError(f"record has no evaluation result: {str(record)[:120]}")


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else math.nan


def outcomes(records, coverage="time"):
    """Columns {verdict, hacked, staged_reward, speedup, coverage} (NumPy) read from
    evaluation results or trajectory records with a nested "result" (docs/rl.md §Input).
    coverage="kernels" reads profile.kernel_coverage (the share of distinct kernels,
    Dr. Kernel's num_coverage) instead of profile.coverage (the share of time)."""
    if coverage not in ("time", "kernels"):
        raise KgymError(f"coverage must be 'time' or 'kernels', not {coverage!r}")
    field = "coverage" if coverage == "time" else "kernel_coverage"
    n = len(records)
    cols = {"verdict": np.empty(n, np.int32), "hacked": np.empty(n, np.uint8),
            "staged_reward": np.empty(n), "speedup": np.empty(n), "coverage": np.empty(n)}
    for i, rec in enumerate(records):
        res = _result_of(rec)
        verdict = res.get("verdict")
        if verdict not in VERDICTS:
            raise KgymError(f"record {i}: unknown verdict {verdict!r}")
        hacks = res.get("hacks")
        cols["verdict"][i] = VERDICTS.index(verdict)
        cols["hacked"][i] = verdict == "hacked" or (isinstance(hacks, list) and len(hacks) > 0)
        cols["staged_reward"][i] = _number(res.get("reward"))
        cols["speedup"][i] = _number((res.get("timing") or {}).get("speedup"))
        cols["coverage"][i] = _number((res.get("profile") or {}).get(field))
    return cols


def _columns_struct(records_or_columns):
    cols = records_or_columns
    is_columns = isinstance(cols, dict) and "verdict" in cols and \
        not isinstance(cols["verdict"], str)
    if not is_columns:
        cols = outcomes(records_or_columns)
    verdict = cols["verdict"]
    if len(verdict) and isinstance(verdict[0], str):
        verdict = [VERDICTS.index(v) if v in VERDICTS else -1 for v in verdict]
    verdict = np.ascontiguousarray(np.asarray(verdict, dtype=np.int32))
    n = verdict.shape[0]
    keep = {"verdict": verdict}
    struct = _Columns(n, _ptr(verdict, c_int32), None, None, None, None)
    if cols.get("hacked") is not None:
        keep["hacked"] = np.ascontiguousarray(np.asarray(cols["hacked"], dtype=np.uint8))
        struct.hacked = _ptr(keep["hacked"], c_uint8)
    for name in ("staged_reward", "speedup", "coverage"):
        if cols.get(name) is not None:
            values = [math.nan if v is None else v for v in cols[name]]
            keep[name] = _f64(values, n, name)
            setattr(struct, name, _ptr(keep[name], c_double))
    return struct, keep, n


def _record_keys(records):
    """(trajectory ids, turns) of trajectory records, by the CLI's rules."""
    traj_keys, turns = [], np.empty(len(records), np.int32)
    for i, rec in enumerate(records):
        prompt = rec.get("prompt")
        if prompt is None:
            task = rec.get("task")
            prompt = task.get("id") if isinstance(task, dict) else task
        if prompt is None and isinstance(rec.get("result"), dict):
            prompt = (rec["result"].get("task") or {}).get("id")
        sample = rec.get("sample")
        traj_keys.append((prompt if prompt is not None else ("#line", i),
                          sample if sample is not None else ("#line", i)))
        turns[i] = rec.get("turn", 1) if rec.get("turn") is not None else 1
    return _dense_ids(traj_keys), turns


# ---------------------------------------------------------------------- rewards

def reward(results, fn="drkernel", trajectory=None, turn=None, **constants):
    """Per-turn rewards.  results: evaluation results / trajectory records, or a
    dict of columns.  trajectory and turn locate the previous turn for the
    regression penalty; for records they are derived from task/sample/turn.
    constants: docs/rl.md names, e.g. speedup_cap=3.0, regression_penalty=0.1."""
    lib = load_library()
    if fn not in REWARD_FUNCTIONS:
        raise KgymError(f"unknown reward function {fn!r} (expected one of {REWARD_FUNCTIONS})")
    cfg, err = _RewardConfig(), _Error()
    lib.kg_reward_config_default(ctypes.byref(cfg), REWARD_FUNCTIONS.index(fn))
    for name, value in constants.items():
        _check(lib.kg_reward_config_set(ctypes.byref(cfg), name.encode(), float(value),
                                        ctypes.byref(err)), err)
    struct, keep, n = _columns_struct(results)
    if trajectory is None and turn is None and isinstance(results, (list, tuple)):
        trajectory, turn = _record_keys(results)
    traj_p = turn_p = None
    if trajectory is not None or turn is not None:
        if trajectory is None or turn is None:
            raise KgymError("pass both trajectory and turn, or neither")
        keep["traj"] = _dense_ids(list(trajectory))
        keep["turn"] = np.ascontiguousarray(np.asarray(turn, dtype=np.int32))
        traj_p, turn_p = _ptr(keep["traj"], c_int64), _ptr(keep["turn"], c_int32)
    out = np.empty(n)
    _check(lib.kg_reward_batch(ctypes.byref(cfg), ctypes.byref(struct), traj_p, turn_p,
                               _ptr(out, c_double), ctypes.byref(err)), err)
    return out


# ------------------------------------------------------------------- advantages

# The option families of include/kgym/rl.h (kg_rl_option); names are looked
# up in the C table so that the binding and the CLI cannot drift apart.
_OPT = {"estimator": 0, "singleton": 1, "masked_reward": 2, "rejected": 3, "small_std": 4,
        "is_level": 5, "mrs_mode": 6, "prs_mode": 7, "curriculum_rule": 8}


def _option(family, name):
    """Code of `name` in an option family; KgymError listing the names otherwise."""
    lib, value, err = load_library(), ctypes.c_int(), _Error()
    if not isinstance(name, str):
        raise KgymError(f"{family} must be a string, not {name!r}")
    _check(lib.kg_rl_option_parse(_OPT[family], name.encode(), ctypes.byref(value),
                                  ctypes.byref(err)), err)
    return value.value


def _flags(values, n, name):
    if values is None:
        return None
    arr = np.ascontiguousarray(np.asarray(values, dtype=bool).astype(np.uint8))
    if arr.shape != (n,):
        raise KgymError(f"{name} must have {n} entries")
    return arr


def advantages(prompt, sample, reward, turn=None, mask=None, estimator="trloo", gamma=1.0,
               normalize_std=False, std_eps=1e-6, singleton="return", keep=None,
               masked_reward="zero", rejected="baseline", small_std="one"):
    """(advantages, returns) as float64 arrays.  prompt and sample may hold any
    hashable ids; a trajectory is (prompt, sample); groups are (prompt, turn)
    for grpo/trloo and prompt for rloo.  mask: 0/False is the loss mask (out of
    the loss and of every baseline); keep: 0/False is a rejection (advantage
    0).  The rules default to Dr. Kernel's (docs/rl.md §3)."""
    lib = load_library()
    cfg, err = _AdvantageConfig(), _Error()
    lib.kg_advantage_config_default(ctypes.byref(cfg), _option("estimator", estimator))
    cfg.gamma, cfg.normalize_std, cfg.std_eps = gamma, int(bool(normalize_std)), std_eps
    cfg.singleton = _option("singleton", singleton)
    cfg.masked_reward = _option("masked_reward", masked_reward)
    cfg.rejected = _option("rejected", rejected)
    cfg.small_std = _option("small_std", small_std)
    r = _f64(reward, name="reward")
    n = r.shape[0]
    if len(prompt) != n or len(sample) != n:
        raise KgymError(f"prompt, sample and reward must have the same length ({n})")
    p_ids, s_ids = _dense_ids(list(prompt)), _dense_ids(list(sample))
    turns = None if turn is None else np.ascontiguousarray(np.asarray(turn, dtype=np.int32))
    if turns is not None and turns.shape != (n,):
        raise KgymError(f"turn must have {n} entries")
    masks, keeps = _flags(mask, n, "mask"), _flags(keep, n, "keep")
    adv, ret = np.empty(n), np.empty(n)
    _check(lib.kg_advantages(ctypes.byref(cfg), n, _ptr(p_ids, c_int64), _ptr(s_ids, c_int64),
                             None if turns is None else _ptr(turns, c_int32), _ptr(r, c_double),
                             None if masks is None else _ptr(masks, c_uint8),
                             None if keeps is None else _ptr(keeps, c_uint8),
                             _ptr(adv, c_double), _ptr(ret, c_double), ctypes.byref(err)), err)
    return adv, ret


def group_filter(group, reward, min_std=1e-3, min_group_size=0):
    """Dr. Kernel's low-variance group filter: a bool keep array, False for every
    record of a group (of 2+) whose reward std (N−1) is below min_std or that
    has fewer than min_group_size records."""
    lib = load_library()
    r = _f64(reward, name="reward")
    n = r.shape[0]
    if len(group) != n:
        raise KgymError(f"group must have {n} entries")
    g = _dense_ids(list(group))
    cfg, err, keep = _GroupFilterConfig(min_std, min_group_size), _Error(), np.empty(n, np.uint8)
    _check(lib.kg_group_filter(ctypes.byref(cfg), n, _ptr(g, c_int64), _ptr(r, c_double),
                               _ptr(keep, c_uint8), None, ctypes.byref(err)), err)
    return keep.astype(bool)


# ------------------------------------------------------------ rejection sampling

def _prs_config(threshold, factor, speedup_threshold, mode="turn"):
    cfg = _PrsConfig()
    load_library().kg_prs_config_default(ctypes.byref(cfg))
    cfg.mode, cfg.threshold, cfg.factor = _option("prs_mode", mode), threshold, factor
    cfg.speedup_threshold = math.nan if speedup_threshold is None else speedup_threshold
    return cfg


def prs_sample(results, seed=0, threshold=0.3, factor=0.1, speedup_threshold=None, mode="turn",
               trajectory=None, live=None, coverage="time"):
    """PRS: (keep bool array, keep probabilities, stats dict), reproducible by seed.
    mode="geometric" judges every turn of a trajectory (trajectory[i], any
    hashable) on the geometric mean coverage of its live turns (live[i] true:
    neither loss-masked nor already rejected; default all).  coverage="kernels"
    judges on profile.kernel_coverage instead of profile.coverage."""
    lib = load_library()
    cfg = _prs_config(threshold, factor, speedup_threshold, mode)
    if coverage != "time" and not (isinstance(results, dict) and "verdict" in results):
        results = outcomes(results, coverage)
    struct, _keep_alive, n = _columns_struct(results)
    traj = None if trajectory is None else _dense_ids(list(trajectory))
    if traj is not None and traj.shape != (n,):
        raise KgymError(f"trajectory must have {n} entries")
    lives = _flags(live, n, "live")
    rng, err, stats = _Rng(), _Error(), _PrsStats()
    lib.kg_rng_seed(ctypes.byref(rng), seed)
    keep, prob = np.empty(n, np.uint8), np.empty(n)
    _check(lib.kg_prs_sample(ctypes.byref(cfg), ctypes.byref(rng), ctypes.byref(struct),
                             None if traj is None else _ptr(traj, c_int64),
                             None if lives is None else _ptr(lives, c_uint8),
                             _ptr(keep, c_uint8), _ptr(prob, c_double), ctypes.byref(stats),
                             ctypes.byref(err)), err)
    return keep.astype(bool), prob, {name: getattr(stats, name) for name, _ in _PrsStats._fields_}


def prs_keep_probability(results, threshold=0.3, factor=0.1, speedup_threshold=None,
                         mode="turn", trajectory=None, live=None, coverage="time"):
    """PRS keep probability of each record (no draw)."""
    return prs_sample(results, 0, threshold, factor, speedup_threshold, mode, trajectory,
                      live, coverage)[1]


def _tokens(log_ratios, trajectory):
    """Flattened log-ratios and int64 offsets of per-turn token arrays."""
    arrays = [_f64(x, name="log_ratios[i]") for x in log_ratios]
    offsets = np.zeros(len(arrays) + 1, np.int64)
    offsets[1:] = np.cumsum([a.shape[0] for a in arrays])
    flat = np.ascontiguousarray(np.concatenate(arrays) if arrays else np.empty(0))
    if len(trajectory) != len(arrays):
        raise KgymError("trajectory must have one entry per turn")
    return flat, offsets, _dense_ids(list(trajectory))


def mrs_filter(log_ratios, trajectory, delta=0.001, veto_threshold=1e-4, mode="geometric",
               mask=None, return_tokens=False):
    """MRS over turns: log_ratios[i] holds turn i's per-token log π_trainer − log
    π_rollout; trajectory[i] names its trajectory; mask[i] = 0 leaves turn i out
    (the loss mask).  mode: token, turn, turn_geo, sequence or geometric.
    Returns (keep, ratio, stats), plus one bool array per turn of token
    decisions with return_tokens=True."""
    lib = load_library()
    flat, offsets, traj = _tokens(log_ratios, trajectory)
    n = traj.shape[0]
    cfg, err, stats = _MrsConfig(), _Error(), _MrsStats()
    lib.kg_mrs_config_default(ctypes.byref(cfg))
    cfg.mode, cfg.delta, cfg.veto_threshold = _option("mrs_mode", mode), delta, veto_threshold
    masks = _flags(mask, n, "mask")
    keep, ratio = np.empty(n, np.uint8), np.empty(n)
    tokens = np.empty(max(flat.shape[0], 1), np.uint8)
    _check(lib.kg_mrs_filter(ctypes.byref(cfg), n, _ptr(traj, c_int64), _ptr(offsets, c_int64),
                             _ptr(flat, c_double), None if masks is None else _ptr(masks, c_uint8),
                             _ptr(keep, c_uint8), _ptr(ratio, c_double), _ptr(tokens, c_uint8),
                             ctypes.byref(stats), ctypes.byref(err)), err)
    out = (keep.astype(bool), ratio,
           {name: getattr(stats, name) for name, _ in _MrsStats._fields_})
    if return_tokens:
        out += ([tokens[offsets[i]:offsets[i + 1]].astype(bool) for i in range(n)],)
    return out


def truncated_is_weights(log_ratios, trajectory, cap=2.0, level="token"):
    """Truncated importance weights min(w, cap), one array per turn."""
    lib = load_library()
    if level not in IS_LEVELS:
        raise KgymError(f"level must be one of {IS_LEVELS}")
    flat, offsets, traj = _tokens(log_ratios, trajectory)
    weights, err = np.empty(max(flat.shape[0], 1)), _Error()
    _check(lib.kg_truncated_is_weights(cap, IS_LEVELS.index(level), traj.shape[0],
                                       _ptr(traj, c_int64), _ptr(offsets, c_int64),
                                       _ptr(flat, c_double), _ptr(weights, c_double),
                                       ctypes.byref(err)), err)
    return [weights[offsets[i]:offsets[i + 1]].copy() for i in range(traj.shape[0])]


# ------------------------------------------------------------------- curriculum

def _curriculum_config(levels=None, window=None, rule=None, step=None, step_window=None,
                       min_steps=None):
    """levels: [(start, end, target), ...] for level indices 1..; None = default
    (Beyond TritonRL's step rule; rule="linear" for the linear ramp)."""
    cfg = _CurriculumConfig()
    load_library().kg_curriculum_config_default(ctypes.byref(cfg))
    if levels is not None:
        if len(levels) >= _MAX_LEVELS:
            raise KgymError(f"at most {_MAX_LEVELS - 1} ramps")
        cfg.n_levels = len(levels) + 1
        for k, (start, end, target) in enumerate(levels, start=1):
            cfg.level[k] = _Ramp(start, end, target)
    if window is not None:
        cfg.window = window
    if rule is not None:
        cfg.rule = _option("curriculum_rule", rule)
    for name, value in (("step", step), ("step_window", step_window), ("min_steps", min_steps)):
        if value is not None:
            setattr(cfg, name, value)
    return cfg


def curriculum_schedule(accuracy, levels=None):
    """Level shares of the linear rule for the given per-level accuracies."""
    lib = load_library()
    cfg = _curriculum_config(levels)
    acc = _f64(accuracy, cfg.n_levels, "accuracy")
    shares, err = np.empty(cfg.n_levels), _Error()
    _check(lib.kg_curriculum_schedule(ctypes.byref(cfg), _ptr(acc, c_double),
                                      _ptr(shares, c_double), ctypes.byref(err)), err)
    return shares


class Curriculum:
    """Adaptive level sampler (seeded; save() / Curriculum.load() resume it).
    Levels are 0-based indices here; the CLI numbers them from 1."""

    def __init__(self, levels=None, window=None, seed=0, rule=None, step=None, step_window=None,
                 min_steps=None, _handle=None):
        self._lib = load_library()
        self._handle = c_void_p()
        if _handle is not None:
            self._handle = _handle
            return
        cfg, err = _curriculum_config(levels, window, rule, step, step_window, min_steps), _Error()
        _check(self._lib.kg_curriculum_create(ctypes.byref(cfg), seed,
                                              ctypes.byref(self._handle), ctypes.byref(err)), err)

    @classmethod
    def load(cls, state):
        lib, handle, err = load_library(), c_void_p(), _Error()
        _check(lib.kg_curriculum_load(state.encode(), ctypes.byref(handle), ctypes.byref(err)),
               err)
        return cls(_handle=handle)

    @property
    def n_levels(self):
        return self._lib.kg_curriculum_get_config(self._handle).contents.n_levels

    def record(self, level, correct):
        err = _Error()
        _check(self._lib.kg_curriculum_record(self._handle, level, int(bool(correct)),
                                              ctypes.byref(err)), err)

    def end_step(self):
        """Closes a training step (the step rule's unit)."""
        err = _Error()
        _check(self._lib.kg_curriculum_end_step(self._handle, ctypes.byref(err)), err)

    def accuracy(self, level):
        return self._lib.kg_curriculum_accuracy(self._handle, level)

    def observed(self, level):
        return self._lib.kg_curriculum_observed(self._handle, level)

    def shares(self):
        out, err = np.empty(self.n_levels), _Error()
        _check(self._lib.kg_curriculum_shares(self._handle, _ptr(out, c_double),
                                              ctypes.byref(err)), err)
        return out

    def sample_level(self):
        level, err = c_size_t(), _Error()
        _check(self._lib.kg_curriculum_sample_level(self._handle, ctypes.byref(level),
                                                    ctypes.byref(err)), err)
        return level.value

    def sample_index(self, n):
        index, err = c_size_t(), _Error()
        _check(self._lib.kg_curriculum_sample_index(self._handle, n, ctypes.byref(index),
                                                    ctypes.byref(err)), err)
        return index.value

    def save(self):
        text, err = c_void_p(), _Error()
        _check(self._lib.kg_curriculum_save(self._handle, ctypes.byref(text), ctypes.byref(err)),
               err)
        return _take_string(text)

    def close(self):
        if self._handle:
            self._lib.kg_curriculum_free(self._handle)
            self._handle = c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass


# ---------------------------------------------------------------------- metrics

def _render(records, trajectory, turn, thresholds, render):
    lib = load_library()
    struct, keep, n = _columns_struct(records)
    if trajectory is None:
        if not isinstance(records, (list, tuple)):
            raise KgymError("columns need an explicit trajectory")
        trajectory, derived_turn = _record_keys(records)
        turn = derived_turn if turn is None else turn
    keep["traj"] = _dense_ids(list(trajectory))
    keep["turn"] = None if turn is None else np.ascontiguousarray(np.asarray(turn, np.int32))
    thr = None if thresholds is None else _f64(thresholds, name="thresholds")
    report, err, text = _MetricsReport(), _Error(), c_void_p()
    _check(lib.kg_metrics_compute(ctypes.byref(struct), _ptr(keep["traj"], c_int64),
                                  None if keep["turn"] is None else _ptr(keep["turn"], c_int32),
                                  None if thr is None else _ptr(thr, c_double),
                                  0 if thr is None else thr.shape[0], ctypes.byref(report),
                                  ctypes.byref(err)), err)
    try:
        _check(getattr(lib, render)(ctypes.byref(report), ctypes.byref(text), ctypes.byref(err)),
               err)
        return _take_string(text)
    finally:
        lib.kg_metrics_report_free(ctypes.byref(report))


def metrics(records, trajectory=None, turn=None, thresholds=None):
    """Compile/correct/hack rates, Fast@p and geomean speedup per turn and best-of-
    turns, as the dict `kgym metrics --format json` prints (null -> None)."""
    return json.loads(_render(records, trajectory, turn, thresholds, "kg_metrics_json"))


def metrics_table(records, trajectory=None, turn=None, thresholds=None):
    return _render(records, trajectory, turn, thresholds, "kg_metrics_table")


def metrics_svg(records, trajectory=None, turn=None, thresholds=None):
    return _render(records, trajectory, turn, thresholds, "kg_metrics_svg")

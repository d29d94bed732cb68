"""Tests of kgym.rl, the ctypes binding of the C RL library: the same
hand-computed numbers as the C and CLI tests, on lists and NumPy arrays, plus
errors, reproducibility and resumption.  Needs build/libkgym.so (or $KGYM_LIB)."""

import json
import math
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from kgym import rl  # noqa: E402

FIXTURES = ROOT / "tests" / "integration" / "rl_fixtures"


def load(name):
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line]


# s0: r 0, 1   s1: .5, .5   s2: 1, 2  (one prompt, turns 1-2)
PROMPT = ["level1/3"] * 6
SAMPLE = [0, 0, 1, 1, 2, 2]
TURN = [1, 2, 1, 2, 1, 2]
REWARD = [0.0, 1.0, 0.5, 0.5, 1.0, 2.0]


def test_trloo_hand_computed_on_lists():
    adv, ret = rl.advantages(PROMPT, SAMPLE, REWARD, turn=TURN, estimator="trloo")
    np.testing.assert_allclose(ret, [1, 1, 1, 0.5, 3, 2])
    np.testing.assert_allclose(adv, [-1, -0.25, -1, -1, 2, 1.25])


def test_grpo_is_shrunk_trloo_on_numpy():
    adv_t, _ = rl.advantages(np.array(PROMPT), np.array(SAMPLE), np.array(REWARD),
                             turn=np.array(TURN), estimator="trloo")
    adv_g, _ = rl.advantages(np.array(PROMPT), np.array(SAMPLE), np.array(REWARD),
                             turn=np.array(TURN), estimator="grpo")
    np.testing.assert_allclose(adv_g, 2 / 3 * adv_t, atol=1e-12)


def test_gamma_mask_and_singleton():
    adv, _ = rl.advantages(PROMPT, SAMPLE, REWARD, turn=TURN, gamma=0.5)
    np.testing.assert_allclose(adv[[0, 2, 4]], [-0.875, -0.5, 1.375])
    mask = [1, 1, 1, 1, 1, 0]
    # the masked reward 2 is zeroed before returns: turn-1 returns are 1, 1, 1
    adv, ret = rl.advantages(PROMPT, SAMPLE, REWARD, turn=TURN, mask=mask)
    np.testing.assert_allclose(adv, [0, 0.5, 0, -0.5, 0, 0])
    assert ret[5] == 0.0 and ret[4] == 1.0
    adv, ret = rl.advantages(PROMPT, SAMPLE, REWARD, turn=TURN, mask=mask, masked_reward="keep")
    np.testing.assert_allclose(adv, [-1, 0.5, -1, -0.5, 2, 0])
    assert ret[5] == 2.0
    alone = [1, 1, 1, 0, 1, 0]
    adv, _ = rl.advantages(PROMPT, SAMPLE, REWARD, turn=TURN, mask=alone)
    assert adv[1] == 1.0  # a singleton keeps A = G
    adv, _ = rl.advantages(PROMPT, SAMPLE, REWARD, turn=TURN, mask=alone, singleton="zero")
    assert adv[1] == 0.0
    with pytest.raises(rl.KgymError, match="expected baseline, drop"):
        rl.advantages(PROMPT, SAMPLE, REWARD, turn=TURN, rejected="shrink")


def test_keep_and_group_filter():
    keep = [1, 1, 1, 1, 0, 1]  # sample 2's turn 1 rejected
    adv, _ = rl.advantages(PROMPT, SAMPLE, REWARD, turn=TURN, keep=keep)
    np.testing.assert_allclose(adv, [-1, -0.25, -1, -1, 0, 1.25])
    adv, _ = rl.advantages(PROMPT, SAMPLE, REWARD, turn=TURN, keep=keep, rejected="drop")
    np.testing.assert_allclose(adv, [0, -0.25, 0, -1, 0, 1.25])
    kept = rl.group_filter(["a", "a", "b", "b", "c"], [1, 1.0005, 0, 1, 3])
    assert kept.tolist() == [False, False, True, True, True]
    kept = rl.group_filter(["a", "a", "b", "b", "c"], [1, 1.0005, 0, 1, 3], min_group_size=2)
    assert kept.tolist() == [False, False, True, True, False]


def test_rloo_and_std_normalised_grpo():
    adv, _ = rl.advantages(["a"] * 3, [0, 1, 2], [1.0, 2.0, 6.0], estimator="rloo")
    np.testing.assert_allclose(adv, [-3, -1.5, 4.5])
    adv, _ = rl.advantages(["a"] * 3, [0, 1, 2], [1.0, 2.0, 6.0], estimator="grpo",
                           normalize_std=True)
    np.testing.assert_allclose(adv, (np.array([1, 2, 6]) - 3) / math.sqrt(7), atol=1e-5)


def test_random_groups_sum_to_zero_and_loo_ignores_own_reward():
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(40), 5)
    samples = np.tile(np.arange(5), 40)
    rewards = rng.normal(size=200)
    adv, _ = rl.advantages(groups, samples, rewards)
    np.testing.assert_allclose(np.bincount(groups, weights=adv), 0, atol=1e-12)
    bumped = rewards.copy()
    bumped[7] += 3.0
    adv2, _ = rl.advantages(groups, samples, bumped)
    assert adv2[7] - bumped[7] == pytest.approx(adv[7] - rewards[7], abs=1e-12)


def test_advantage_errors_name_the_record():
    bad = list(REWARD)
    bad[3] = float("nan")
    with pytest.raises(rl.KgymError, match="record 3.*NaN"):
        rl.advantages(PROMPT, SAMPLE, bad, turn=TURN)
    with pytest.raises(rl.KgymError, match="single-turn"):
        rl.advantages(PROMPT, SAMPLE, REWARD, turn=TURN, estimator="rloo")
    with pytest.raises(rl.KgymError, match="unknown estimator"):
        rl.advantages(PROMPT, SAMPLE, REWARD, estimator="ppo")


def test_rewards_from_results():
    records = load("multi_turn_results.jsonl")
    np.testing.assert_allclose(rl.reward(records), [0, 1.9, 1.3, 0, 0, 0.925])
    np.testing.assert_allclose(rl.reward(records, fn="tritonrl"), [0, 3, 2.1, 0, 0, 1.5])
    np.testing.assert_allclose(rl.reward(records, fn="staged", speed_weight=0.1),
                               [0.3, 1.2, 1.11, 0.7, 0, 1.05])
    np.testing.assert_allclose(rl.reward(records, fn="speedup"),
                               [-2, math.log(2), math.log(1.1), -2, -2, math.log(0.5)])
    # regressions are found from task/sample/turn: sample 1 falls from 1.3 to 0
    np.testing.assert_allclose(rl.reward(records, regression_penalty=0.5, hack_penalty=1),
                               [0, 1.9, 1.3, -0.5, -1, 0.925])


def test_verdicts_are_the_libraries():
    """rl.VERDICTS (generated from rl.h's KG_VERDICT_MAP) is the C library's kg_verdict, code for code: the codes
    the binding passes in kg_outcome_columns."""
    import ctypes

    name = rl.load_library().kg_verdict_name
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.c_int]
    assert [name(i).decode() for i in range(len(rl.VERDICTS) + 1)] == list(rl.VERDICTS) + ["?"]


def test_reward_from_columns_and_errors():
    cols = {"verdict": ["correct", "incorrect"], "speedup": [2.0, None],
            "coverage": [0.8, None]}
    np.testing.assert_allclose(rl.reward(cols), [1.9, 0.0])
    with pytest.raises(rl.KgymError, match="no_such"):
        rl.reward(cols, no_such=1.0)
    with pytest.raises(rl.KgymError, match="unknown verdict"):
        rl.reward([{"verdict": "passed"}])
    with pytest.raises(rl.KgymError, match="record 0.*staged"):
        rl.reward([{"verdict": "correct"}], fn="staged")


def test_prs_probabilities_frequencies_and_seed():
    records = load("prs.jsonl")
    np.testing.assert_allclose(rl.prs_keep_probability(records), [0, 1, 1, 1, 0.5])
    n = 20000
    many = {"verdict": ["correct"] * n, "coverage": [0.35] * n}
    keep, prob, stats = rl.prs_sample(many, seed=4)
    assert abs(keep.mean() - 0.5) < 4.5 * math.sqrt(0.25 / n)
    assert stats["correct"] == n and stats["kept"] == keep.sum()
    again, _, _ = rl.prs_sample(many, seed=4)
    other, _, _ = rl.prs_sample(many, seed=5)
    assert (keep == again).all() and not (keep == other).all()
    with pytest.raises(rl.KgymError, match="record 0.*coverage"):
        rl.prs_sample(load("bench_cpu.jsonl"))


def test_mrs_and_importance_weights():
    lo = math.log(1e-5)
    keep, geo, stats = rl.mrs_filter(
        [[math.log(1.0009)] * 2, [math.log(1.0011)], [0.0, lo], [-lo]], ["a", "b", "c", "c"])
    assert keep.tolist() == [True, False, False, True]
    assert geo[0] == pytest.approx(1.0009) and geo[2] == pytest.approx(1.0)
    assert stats["turns_vetoed"] == 1
    w = rl.truncated_is_weights([np.log([0.5, 3.0]), np.log([1.2])], [0, 0], cap=2.0,
                                level="sequence")
    np.testing.assert_allclose(np.concatenate(w), [1.8, 1.8, 1.8])
    w = rl.truncated_is_weights([np.log([0.5, 3.0])], [0], cap=2.0)
    np.testing.assert_allclose(w[0], [0.5, 2.0])


def test_curriculum_schedule_and_resume():
    np.testing.assert_allclose(rl.curriculum_schedule([0.2, 0.0]), [0.7, 0.3])
    np.testing.assert_allclose(rl.curriculum_schedule([0.9, 0.0]), [0.5, 0.5])
    np.testing.assert_allclose(rl.curriculum_schedule([0.2, 0.25, 0], levels=[
        (0.1, 0.5, 0.4), (0.0, 0.3, 0.5)]), [0.55, 0.3, 0.15])
    cur = rl.Curriculum(window=4, seed=9)
    for outcome in (1, 1, 0, 0, 0):
        cur.record(0, outcome)
    assert cur.accuracy(0) == 0.25 and cur.observed(0) == 4
    state = cur.save()
    first = [(cur.sample_level(), cur.sample_index(10)) for _ in range(30)]
    resumed = rl.Curriculum.load(state)
    assert [(resumed.sample_level(), resumed.sample_index(10)) for _ in range(30)] == first
    with pytest.raises(rl.KgymError, match="level index 5"):
        cur.record(5, True)
    with pytest.raises(rl.KgymError, match="negative share"):
        rl.Curriculum(levels=[(0.6, 0.6, 0.4), (0.5, 0.5, 0.4)])


def test_curriculum_step_rule():
    cur = rl.Curriculum(seed=1)  # Beyond TritonRL: +0.05 per step once 5 steps average >= 0.4
    shares = []
    for _ in range(7):
        for outcome in (1, 1, 0, 0, 0):  # 0.4 each step
            cur.record(0, outcome)
        cur.end_step()
        shares.append(cur.shares()[1])
    np.testing.assert_allclose(shares, [0.1, 0.1, 0.1, 0.1, 0.15, 0.2, 0.25])
    lin = rl.Curriculum(seed=1, rule="linear")
    lin.record(0, True)
    assert lin.shares()[1] == pytest.approx(0.5)  # linear: one success is enough
    fast = rl.Curriculum(seed=1, step=0.2, step_window=1, min_steps=1)
    fast.record(0, True)
    fast.end_step()
    assert fast.shares()[1] == pytest.approx(0.3)
    with pytest.raises(rl.KgymError, match="expected step, linear"):
        rl.Curriculum(rule="ramp")


def test_metrics_hand_computed():
    report = rl.metrics(load("multi_turn_results.jsonl"))
    t1, t2 = report["per_turn"]
    assert t1["compile_rate"] == pytest.approx(1 / 3)  # the hacked turn did not compile
    assert t1["hack_rate"] == pytest.approx(1 / 3)
    assert t1["fast"]["1.2"] == 0.0
    assert t2["fast"]["2"] == pytest.approx(1 / 3)
    assert t2["geomean_speedup"] == pytest.approx(1.0)
    best = report["best_of_turns"][1]
    assert best["correct_rate"] == 1.0
    assert best["fast"]["1"] == pytest.approx(2 / 3)
    assert best["geomean_speedup"] == pytest.approx((2 * 1.1 * 0.5) ** (1 / 3))
    cpu = rl.metrics(load("bench_cpu.jsonl"), thresholds=[1, 2])
    assert cpu["per_turn"][0]["correct_rate"] == 0.5
    assert cpu["per_turn"][0]["geomean_speedup"] is None
    svg = rl.metrics_svg(load("multi_turn_results.jsonl"))
    assert svg.startswith("<svg") and svg.count("<polyline") == 10
    assert ET.fromstring(svg).tag.endswith("svg")  # well-formed XML
    assert "Best of turns" in rl.metrics_table(load("bench_cpu.jsonl"))


def test_mrs_modes_mask_and_prs_geometric():
    lr = [[math.log(1.0004)] * 2, [1.6], [0.0, -math.inf], [0.0005, 0.0015]]
    traj = ["a", "a", "b", "c"]
    keep, ratio, stats = rl.mrs_filter(lr, traj, mask=[1, 0, 1, 1])
    assert keep.tolist() == [True, True, False, False] and stats["turns_vetoed"] == 1
    assert ratio[0] == pytest.approx(1.0004)
    keep, _, _ = rl.mrs_filter(lr, traj)  # unmasked, the 1.6 drops all of "a"
    assert keep.tolist()[:2] == [False, False]
    keep, ratio, _, tokens = rl.mrs_filter(lr, traj, mode="token", mask=[1, 0, 1, 1],
                                           return_tokens=True)
    assert [t.tolist() for t in tokens] == [[True, True], [True], [False, False], [True, False]]
    assert math.isnan(ratio[0])
    res = [{"verdict": "correct", "profile": {"coverage": c}} for c in (0.5, 0.32)]
    p = rl.prs_keep_probability(res)
    np.testing.assert_allclose(p, [1.0, 0.2])
    p = rl.prs_keep_probability(res, mode="geometric", trajectory=["s", "s"])
    np.testing.assert_allclose(p, [1.0, 1.0])


def test_prs_on_kernel_coverage():
    res = [{"verdict": "correct", "profile": {"coverage": 0.9, "kernel_coverage": 0.35}}]
    assert rl.prs_keep_probability(res)[0] == pytest.approx(1.0)
    assert rl.prs_keep_probability(res, coverage="kernels")[0] == pytest.approx(0.5)
    with pytest.raises(rl.KgymError, match="kernels"):
        rl.prs_keep_probability(res, coverage="count")

"""kgym's RL defaults against an independent transcription of Dr. Kernel's code.

Each ``dk_*`` function below re-derives, in NumPy and in Dr. Kernel's own data
layout, what one function of hkust-nlp/KernelGYM computes (commit
3a84417f8c0efaadb215ef638b37d12e71ed20f3; file and line references at each
function; docs/rl.md cites the same places).  Nothing is imported from there:
the point is that two independent readings agree.

Dr. Kernel's layout: a batch of trajectories, each ``max_turns`` rows long; a
trajectory that stopped early is padded at the end with rows whose
``turn_indices`` is -1 and whose ``loss_mask`` is 0.  ``uid`` names the prompt
group.  The rejection samplers only edit ``response_mask``; advantages are
multiplied by it afterwards.

kgym's layout: one record per existing turn, (prompt, sample, turn), with
``mask`` (the loss mask) and ``keep`` (the rejection decision).

Every random batch has ties (rewards from a small set), singleton groups,
loss-masked turns, rejected turns and trajectories of different lengths.
Every comparison is to 1e-9 (float64 on both sides).
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from kgym import rl  # noqa: E402

TOL = 1e-9
SAFETY_BOUND = 20.0  # mismatch_helper.py:72, coverage_helper.py:6


# --------------------------------------------------------------- the batches

def random_batch(rng, max_turns=3):
    """Trajectories of random length in prompt groups of random size (1..5)."""
    rows = []  # one dict per Dr. Kernel row
    n_prompts = int(rng.integers(2, 7))
    traj = 0
    for p in range(n_prompts):
        for s in range(int(rng.integers(1, 6))):
            length = int(rng.integers(1, max_turns + 1))
            for t in range(max_turns):
                real = t < length
                rows.append({
                    "uid": f"u{p}", "prompt": p, "sample": s, "traj": traj,
                    "turn_index": t if real else -1,
                    "reward": float(rng.choice([0.0, 0.5, 1.0, 1.3, 2.5])) if real else 0.0,
                    # a real turn is loss-masked 1 time in 5, rejected 1 in 6
                    "loss_mask": int(real and rng.random() > 0.2),
                    "keep": int(rng.random() > 1 / 6),
                })
            traj += 1
    return rows


def kgym_records(rows):
    real = [r for r in rows if r["turn_index"] >= 0]
    return real, dict(
        prompt=[r["prompt"] for r in real], sample=[r["sample"] for r in real],
        reward=[r["reward"] for r in real], turn=[r["turn_index"] + 1 for r in real],
        mask=[r["loss_mask"] for r in real], keep=[r["keep"] for r in real])


# ------------------------------------------------- Dr. Kernel, transcribed

def dk_returns(scores, gamma, max_turns):
    """core_algos.py:31-45 compute_multi_turn_returns: per block of max_turns
    rows, R_i = s_i + γ R_{i+1}, the last row R = s."""
    s = np.asarray(scores, float).reshape(-1, max_turns)
    out = np.zeros_like(s)
    for i in reversed(range(max_turns)):
        out[:, i] = s[:, i] + (gamma * out[:, i + 1] if i < max_turns - 1 else 0.0)
    return out.reshape(-1)


def dk_masked_scores(rows):
    """kernel_trainer.py:101-118 apply_loss_mask_to_rewards, called before the
    advantages (kernel_trainer.py:3127, 3381): rewards × loss_mask."""
    return np.array([r["reward"] * r["loss_mask"] for r in rows])


def dk_response_alive(rows):
    """kernel_trainer.py:79-98 apply_loss_mask_to_masks, then the rejection
    samplers' edits (kernel_trainer.py:2688-2690): a row keeps any response
    token iff it is loss-masked in and not rejected."""
    return np.array([float(r["loss_mask"] and r["keep"]) for r in rows])


def dk_groups(rows):
    """(uid, turn) over rows with turn_indices != -1 and loss_mask
    (core_algos.py:444-448; kernel_trainer.py:383-388)."""
    groups = {}
    for i, r in enumerate(rows):
        if r["turn_index"] == -1 or not r["loss_mask"]:
            continue
        groups.setdefault((r["uid"], r["turn_index"]), []).append(i)
    return groups


def dk_trloo(rows, max_turns, gamma=1.0):
    """core_algos.py:405-475 compute_multi_turn_rloo_outcome_advantage."""
    returns = dk_returns(dk_masked_scores(rows), gamma, max_turns)
    adv = np.zeros(len(rows))
    for members in dk_groups(rows).values():
        n = len(members)
        mean = np.mean(returns[members])
        for i in members:
            adv[i] = returns[i] * n / (n - 1) - mean * n / (n - 1) if n > 1 else returns[i]
    alive = dk_response_alive(rows)
    return adv * alive, returns * alive


def dk_grpo_multi_turn(rows, max_turns, gamma=1.0):
    """kernel_trainer.py:361-420 compute_multi_turn_advantage, "grpo": the same
    groups, baseline = group mean (0 for a group of one), no std."""
    returns = dk_returns(dk_masked_scores(rows), gamma, max_turns)
    base = np.zeros(len(rows))
    for members in dk_groups(rows).values():
        if len(members) > 1:
            base[members] = np.mean(returns[members])
    return (returns - base) * dk_response_alive(rows)


def dk_grpo_std(uid, score, eps=1e-6):
    """core_algos.py:267-332 compute_grpo_outcome_advantage (one response per
    row: the reward-to-go at position 0 is the row's reward)."""
    groups = {}
    for i, u in enumerate(uid):
        groups.setdefault(u, []).append(i)
    mean, std = {}, {}
    for u, members in groups.items():
        if len(members) == 1:
            mean[u], std[u] = 0.0, 1.0
        else:
            x = np.asarray(score)[members]
            mean[u], std[u] = x.mean(), x.std(ddof=1)
            if std[u] < eps:
                std[u] = 1.0
    return np.array([(score[i] - mean[u]) / (std[u] + eps) for i, u in enumerate(uid)])


def dk_rloo(uid, score):
    """core_algos.py:335-402 compute_rloo_outcome_advantage."""
    out = np.zeros(len(uid))
    for u in set(uid):
        members = [i for i, v in enumerate(uid) if v == u]
        if len(members) == 1:
            out[members[0]] = score[members[0]]
            continue
        total = sum(score[i] for i in members)
        for i in members:
            out[i] = score[i] - (total - score[i]) / (len(members) - 1)
    return out


def dk_group_filter(uid, reward, min_group_size):
    """unified_filter.py:301-321 (a group of 2+ whose reward std (torch.std,
    N−1) is below 1e-3 is rejected) and :407-420 (fewer valid samples than
    min_group_size)."""
    keep = {}
    for u in dict.fromkeys(uid):
        x = np.array([r for v, r in zip(uid, reward) if v == u])
        low = len(x) > 1 and x.std(ddof=1) < 1e-3
        keep[u] = not low and len(x) >= min_group_size
    return np.array([keep[u] for u in uid])


def masked_sum(x, m):
    return float(np.sum(x * m))


def masked_mean(x, m):
    """verl.utils.torch_functional.masked_mean: sum(x·m) / (sum(m) + 1e-8)."""
    return float(np.sum(x * m) / (np.sum(m) + 1e-8))


def dk_mrs(token_lr, token_mask, max_turns, mode, lower, upper, veto):
    """mismatch_helper.py:75-224 compute_rollout_rejection_mask and :679-700
    the veto.  token_lr / token_mask: (rows, seq) with the loss mask already
    in token_mask.  Returns the edited token mask."""
    rows, seq = token_lr.shape
    safe_exp = lambda v: np.exp(np.clip(v, -SAFETY_BOUND, SAFETY_BOUND))  # noqa: E731
    if mode == "token":
        w = safe_exp(token_lr)
    elif mode in ("turn", "turn_geo"):
        agg = masked_sum if mode == "turn" else masked_mean
        w = np.repeat([[safe_exp(agg(token_lr[r], token_mask[r]))] for r in range(rows)], seq, 1)
    else:  # sequence / geometric over the max_turns rows of a trajectory
        agg = masked_sum if mode == "sequence" else masked_mean
        w = np.zeros_like(token_lr)
        for b in range(rows // max_turns):
            sl = slice(b * max_turns, (b + 1) * max_turns)
            w[sl] = safe_exp(agg(token_lr[sl].reshape(-1), token_mask[sl].reshape(-1)))
    out = token_mask * ((w >= lower) & (w <= upper))
    with np.errstate(divide="ignore"):
        catastrophic = (token_lr < math.log(veto)) & token_mask.astype(bool)
    return out * ~catastrophic.any(axis=1, keepdims=True)


def dk_prs_prob(coverage, correct, alive, max_turns, mode, threshold=0.3, factor=0.1,
                speedup=None, speedup_threshold=None):
    """coverage_helper.py:176-300 compute_rollout_rejection_mask: the keep
    probability (the Bernoulli draw itself uses torch's generator)."""
    cov = np.asarray(coverage, float).reshape(-1, max_turns)
    if mode == "geometric":
        valid = np.asarray(alive, bool).reshape(-1, max_turns)
        logc = np.where(valid, np.log(np.clip(cov, 1e-8, None)), 0.0)
        mean = logc.sum(1, keepdims=True) / np.clip(valid.sum(1, keepdims=True), 1, None)
        cov = np.repeat(np.exp(np.clip(mean, -SAFETY_BOUND, SAFETY_BOUND)), max_turns, 1)
    p = np.clip((cov - threshold) / factor, 0, 1)
    p = np.where(np.asarray(correct, bool).reshape(-1, max_turns), p, 1.0)
    if speedup is not None and speedup_threshold is not None:
        fast = (np.asarray(speedup, float).reshape(-1, max_turns) >= speedup_threshold)
        p = np.maximum(p, fast.astype(float))
    return p.reshape(-1)


FAST = (1.0, 1.2, 1.5, 2.0, 3.0)


def dk_metrics(infos):
    """kernel_multi_turn_metrics.py:176-345: per-turn correctness rate,
    compilation rate and fast@p_in_all over the samples that have the turn;
    best_by_turn correctness rate and fast@p_in_all over all samples.
    infos: {sample_id: {turn: {"correctness", "decoy_kernel", "performance",
    "compilation"}}}."""
    max_turn = max(t for d in infos.values() for t in d)
    per_turn, best = {}, {}
    for t in range(1, max_turn + 1):
        corr, comp, perf = [], [], []
        for d in infos.values():
            if t not in d:
                continue
            info = d[t]
            ok = info["correctness"] and not info["decoy_kernel"]
            corr.append(1.0 if ok else 0.0)
            perf.append(float(info["performance"]) if ok else 0.0)
            comp.append(1.0 if info["compilation"] else 0.0)
        if corr:
            per_turn[t] = dict(correct=np.mean(corr), compile=np.mean(comp),
                               fast=[np.mean(np.array(perf) >= p) for p in FAST])
        bc, bp = [], []
        for d in infos.values():
            best_ok, best_perf = False, 0.0
            for u in range(1, t + 1):
                if u not in d:
                    continue
                info = d[u]
                if info["correctness"] and not info["decoy_kernel"]:
                    if not best_ok or info["performance"] > best_perf:
                        best_ok, best_perf = True, info["performance"]
            bc.append(1.0 if best_ok else 0.0)
            bp.append(float(best_perf) if best_ok else 0.0)
        best[t] = dict(correct=np.mean(bc), fast=[np.mean(np.array(bp) >= p) for p in FAST])
    return per_turn, best


# ------------------------------------------------------------- the tests

SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_trloo_and_grpo_match_drkernel(seed):
    rng = np.random.default_rng(seed)
    max_turns = int(rng.integers(1, 5))
    gamma = float(rng.choice([1.0, 0.9]))
    rows = random_batch(rng, max_turns)
    real, rec = kgym_records(rows)
    idx = [i for i, r in enumerate(rows) if r["turn_index"] >= 0]
    want_adv, want_ret = dk_trloo(rows, max_turns, gamma)
    adv, ret = rl.advantages(**rec, estimator="trloo", gamma=gamma)
    np.testing.assert_allclose(adv, want_adv[idx], atol=TOL, rtol=0)
    live = np.array([r["loss_mask"] and r["keep"] for r in real], bool)
    np.testing.assert_allclose(ret[live], want_ret[idx][live], atol=TOL, rtol=0)
    adv, _ = rl.advantages(**rec, estimator="grpo", gamma=gamma)
    np.testing.assert_allclose(adv, dk_grpo_multi_turn(rows, max_turns, gamma)[idx],
                               atol=TOL, rtol=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_single_turn_grpo_std_and_rloo_match_drkernel(seed):
    rng = np.random.default_rng(1000 + seed)
    uid, score = [], []
    for p in range(int(rng.integers(2, 8))):
        n = int(rng.integers(1, 6))
        tie = rng.random() < 0.3  # a whole group tied: std 0 -> 1
        base = float(rng.choice([0.0, 1.0, 2.5]))
        for _ in range(n):
            uid.append(p)
            near_tie = base + (0.0 if tie else float(rng.choice([0.0, 1e-8, 0.5, 1.3])))
            score.append(near_tie)
    sample = list(range(len(uid)))
    adv, _ = rl.advantages(uid, sample, score, estimator="grpo", normalize_std=True)
    np.testing.assert_allclose(adv, dk_grpo_std(uid, score), atol=TOL, rtol=0)
    adv, _ = rl.advantages(uid, sample, score, estimator="rloo")
    np.testing.assert_allclose(adv, dk_rloo(uid, score), atol=TOL, rtol=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_group_filter_matches_drkernel(seed):
    rng = np.random.default_rng(2000 + seed)
    uid, reward = [], []
    for p in range(int(rng.integers(2, 9))):
        n = int(rng.integers(1, 6))
        spread = float(rng.choice([0.0, 5e-4, 1e-2, 1.0]))
        for _ in range(n):
            uid.append(f"g{p}")
            reward.append(float(rng.choice([0.0, 1.0])) * spread + 0.5)
    for min_group_size in (0, 2, 3):
        keep = rl.group_filter(uid, reward, min_group_size=min_group_size)
        assert keep.tolist() == dk_group_filter(uid, reward, min_group_size).tolist()


@pytest.mark.parametrize("mode", ["token", "turn", "turn_geo", "sequence", "geometric"])
@pytest.mark.parametrize("seed", range(15))
def test_mrs_matches_drkernel(mode, seed):
    rng = np.random.default_rng(3000 + seed)
    max_turns, seq = 3, 6
    n_traj = int(rng.integers(1, 6))
    rows = n_traj * max_turns
    lengths = rng.integers(0, seq + 1, size=rows)  # 0: a turn without tokens
    token_mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(float)
    loss = (rng.random(rows) > 0.25).astype(float)
    scale = float(rng.choice([2e-4, 6e-4, 3e-3]))
    lr = rng.normal(0.0, scale, size=(rows, seq))
    lr[rng.random((rows, seq)) < 0.03] = -12.0  # below log(1e-4): a veto
    # -inf only in live turns: in Dr. Kernel a -inf under a zero mask becomes
    # NaN (−inf·0) and rejects the whole trajectory; kgym leaves masked turns
    # out entirely (docs/rl.md §4)
    lr[(rng.random((rows, seq)) < 0.02) & (loss[:, None] > 0)] = -math.inf
    lr = np.where(token_mask > 0, lr, 0.0)  # padding tokens carry 0
    want = dk_mrs(lr, token_mask * loss[:, None], max_turns, mode, 0.999, 1.001, 1e-4)
    log_ratios = [lr[r, :lengths[r]] for r in range(rows)]
    traj = [r // max_turns for r in range(rows)]
    keep, _, _, tokens = rl.mrs_filter(log_ratios, traj, delta=0.001, veto_threshold=1e-4,
                                       mode=mode, mask=loss, return_tokens=True)
    for r in range(rows):
        if not loss[r]:
            continue  # out of the loss either way (Dr. Kernel's row is all 0)
        got = tokens[r].astype(float)
        assert got.tolist() == want[r, :lengths[r]].tolist(), (mode, r)
        if lengths[r]:
            assert keep[r] == bool(want[r].any())


@pytest.mark.parametrize("mode", ["turn", "geometric"])
@pytest.mark.parametrize("seed", range(20))
def test_prs_probabilities_match_drkernel(mode, seed):
    rng = np.random.default_rng(4000 + seed)
    max_turns = 3
    n = int(rng.integers(1, 6)) * max_turns
    correct = rng.random(n) < 0.6
    cov = np.where(correct, rng.choice([0.1, 0.3, 0.33, 0.36, 0.4, 0.8], size=n), np.nan)
    speedup = rng.choice([0.5, 1.0, 1.6, 3.0], size=n)
    alive = rng.random(n) > 0.2
    threshold = None if rng.random() < 0.5 else 1.5
    results = [{"verdict": "correct" if c else "incorrect",
                "profile": {"coverage": None if np.isnan(v) else float(v)},
                "timing": {"speedup": float(s)}} for c, v, s in zip(correct, cov, speedup)]
    p = rl.prs_keep_probability(results, mode=mode, speedup_threshold=threshold,
                                trajectory=[i // max_turns for i in range(n)], live=alive)
    # Dr. Kernel reads a missing coverage as 0.0 (kernel_trainer.py:2626)
    want = dk_prs_prob(np.nan_to_num(cov, nan=0.0), correct, alive, max_turns, mode,
                       speedup=speedup, speedup_threshold=threshold)
    np.testing.assert_allclose(p, want, atol=TOL, rtol=0)


VERDICTS = ["correct", "incorrect", "hacked", "compile_error", "runtime_error", "timeout",
            "invalid"]


@pytest.mark.parametrize("seed", range(20))
def test_metrics_match_drkernel(seed):
    rng = np.random.default_rng(5000 + seed)
    records, infos = [], {}
    for s in range(int(rng.integers(1, 9))):
        first = int(rng.integers(1, 3))  # some samples have no turn 1
        for t in range(first, first + int(rng.integers(1, 4))):
            v = str(rng.choice(VERDICTS, p=[0.4, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05]))
            sp = float(rng.choice([0.5, 1.0, 1.2, 1.49, 2.0, 3.5]))
            records.append({"task": "t", "sample": s, "turn": t,
                            "result": {"verdict": v, "timing": {"speedup": sp}}})
            # the reward manager's extra info for that evaluation
            # (kernel_async.py:267-285) after the reward client
            # (reward_client.py:448-485): a task that did not complete (a
            # timeout) and a decoy kernel (hacked) come back with correctness,
            # compiled and speedup all False / 0
            infos.setdefault(s, {})[t] = {
                "correctness": v == "correct", "decoy_kernel": v == "hacked",
                "performance": sp if v == "correct" else 0.0,
                "compilation": v in ("correct", "incorrect", "runtime_error")}
    per_turn, best = dk_metrics(infos)
    report = rl.metrics(records)
    for m in report["per_turn"]:
        want = per_turn[m["turn"]]
        assert m["correct_rate"] == pytest.approx(want["correct"], abs=TOL)
        assert m["compile_rate"] == pytest.approx(want["compile"], abs=TOL)
        assert [m["fast"][k] for k in ("1", "1.2", "1.5", "2", "3")] == \
            pytest.approx(want["fast"], abs=TOL)
    for m in report["best_of_turns"]:
        want = best[m["turn"]]
        assert m["correct_rate"] == pytest.approx(want["correct"], abs=TOL)
        assert [m["fast"][k] for k in ("1", "1.2", "1.5", "2", "3")] == \
            pytest.approx(want["fast"], abs=TOL)


def btr_update(history, p, trigger=0.4, end=0.5):
    """vanshajagrawal/beyondtritonrl extensions/curriculum.py:57-79
    update_curriculum (commit c10b8000): once 5 step accuracies exist and the
    mean of the last 5 is >= the trigger, p = min(p + 0.05, end)."""
    if len(history) >= 5 and np.mean(history[-5:]) >= trigger:
        p = min(p + 0.05, end)
    return p


@pytest.mark.parametrize("seed", range(10))
def test_curriculum_matches_beyond_tritonrl(seed):
    rng = np.random.default_rng(6000 + seed)
    cur = rl.Curriculum(seed=seed)
    history, p = [], 0.1  # extensions/config.py:22-24
    for _ in range(40):
        n = int(rng.integers(1, 9))
        hits = int(rng.integers(0, n + 1))
        for i in range(n):
            cur.record(0, i < hits)
        cur.end_step()
        history.append(hits / n)
        p = btr_update(history, p)
        assert cur.shares()[1] == pytest.approx(p, abs=TOL)

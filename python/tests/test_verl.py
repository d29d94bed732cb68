"""kgym's verl integration (python/kgym/verl_hooks.py) against verl's real code.

verl is heavy (torch and more), so this is not installed by `make test`.  The
tests run when `import verl` works in the interpreter running pytest, or when
KGYM_VERL_PYTHON names the python of a venv that has verl and pytest (then
this file is re-run under it).  Otherwise they are skipped, with the reason.

    python3 -m venv /tmp/verlvenv
    /tmp/verlvenv/bin/pip install verl pytest cachetools uvicorn fastapi
    KGYM_VERL_PYTHON=/tmp/verlvenv/bin/python .venv/bin/python -m pytest -q python/tests/test_verl.py
"""
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import verl_env  # noqa: E402

try:
    import torch
    from verl import DataProto
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.ray_trainer import compute_advantage as verl_compute_advantage
    WHY_NOT = None
except Exception as exc:  # noqa: BLE001 - any failure means "no usable verl here"
    WHY_NOT = f"{type(exc).__name__}: {exc}"

if not verl_env.here(WHY_NOT):
    test_under_the_verl_venv = verl_env.rerun_test(__file__, WHY_NOT)
else:
    from kgym import rl, verl_hooks

    verl_hooks.register()
    L = 10

    def batch(rewards, masks, uids):
        """A verl DataProto: rewards {row: {token: r}}, masks {row: [(start, end)]}."""
        n = len(uids)
        tlr, rm = torch.zeros(n, L), torch.zeros(n, L)
        for row, spans in masks.items():
            for s, e in spans:
                rm[row, s:e] = 1
        for row, d in rewards.items():
            for t, r in d.items():
                tlr[row, t] = r
        return DataProto.from_dict(tensors={"token_level_rewards": tlr, "response_mask": rm},
                                   non_tensors={"uid": np.array(uids, dtype=object)})

    # Three samples of prompt "p" (docs: turns are runs of response_mask):
    #   row 0: turn 1 tokens 0-2 (r .5), environment 3-4, turn 2 tokens 5-7 (r 1)
    #   row 1: turn 1 tokens 0-3 (r 0),  environment 4-5, turn 2 tokens 6-8 (r 2)
    #   row 2: turn 1 tokens 0-1 (r 1), stopped
    # returns: row 0 1.5, 1; row 1 2, 2; row 2 1.  TRLOO: turn 1 {1.5, 2, 1} ->
    # 0, 0.75, -0.75; turn 2 {1, 2} -> -1, 1.
    SPANS = {0: [(0, 3), (5, 8)], 1: [(0, 4), (6, 9)], 2: [(0, 2)]}
    REWARDS = {0: {2: 0.5, 7: 1.0}, 1: {3: 0.0, 8: 2.0}, 2: {1: 1.0}}

    def expected(values):
        out = torch.zeros(3, L)
        for row, spans in SPANS.items():
            for (s, e), v in zip(spans, values[row]):
                out[row, s:e] = v
        return out

    def test_registered_in_verls_registry():
        for name in ("kgym_trloo", "kgym_grpo", "kgym_rloo"):
            assert name in core_algos.ADV_ESTIMATOR_REGISTRY
            assert core_algos.get_adv_estimator_fn(name) is verl_hooks._FUNCTIONS[name]
        verl_hooks.register()  # idempotent: verl refuses a different function under a name

    def test_trloo_through_verls_compute_advantage():
        data = batch(REWARDS, SPANS, ["p", "p", "p"])
        data = verl_compute_advantage(data, "kgym_trloo", config=AlgoConfig(gamma=1.0))
        want = expected({0: [0.0, -1.0], 1: [0.75, 1.0], 2: [-0.75]})
        torch.testing.assert_close(data.batch["advantages"], want, atol=1e-6, rtol=0)
        torch.testing.assert_close(data.batch["returns"],
                                   expected({0: [1.5, 1.0], 1: [2.0, 2.0], 2: [1.0]}),
                                   atol=1e-6, rtol=0)

    def test_rejected_turn_stays_in_the_baseline():
        data = batch(REWARDS, SPANS, ["p", "p", "p"])
        verl_hooks.set_turn_flags(data, keep=[[1, 1], [1, 0], [1]])
        data = verl_hooks.compute_advantage(data, "kgym_trloo", config=AlgoConfig(gamma=1.0))
        # row 1's turn 2 gets 0; row 0's turn 2 is still 1 - 2 = -1
        want = expected({0: [0.0, -1.0], 1: [0.75, 0.0], 2: [-0.75]})
        torch.testing.assert_close(data.batch["advantages"], want, atol=1e-6, rtol=0)
        # a loss-masked turn 2 of row 1: its reward 2 is zeroed, so row 1's
        # returns become 0, 0; turn 1 {1.5, 0, 1} -> 1.5 - .5, 0 - 1.25, 1 - .75;
        # turn 2 {1} alone -> A = G = 1
        verl_hooks.set_turn_flags(data, mask=[[1, 1], [1, 0], [1]])
        data = verl_hooks.compute_advantage(data, "kgym_trloo", config=AlgoConfig(gamma=1.0))
        want = expected({0: [1.0, 1.0], 1: [-1.25, 0.0], 2: [0.25]})
        torch.testing.assert_close(data.batch["advantages"], want, atol=1e-6, rtol=0)

    def single_turn(scores, uids):
        n = len(scores)
        return batch({i: {4: s} for i, s in enumerate(scores)}, {i: [(0, 5)] for i in range(n)},
                     uids)

    @pytest.mark.parametrize("seed", range(5))
    def test_rloo_and_grpo_agree_with_verls_own(seed):
        rng = np.random.default_rng(seed)
        uids = [f"u{int(g)}" for g in rng.integers(0, 4, size=12)]
        scores = rng.choice([0.0, 0.5, 1.0, 2.0], size=12).tolist()
        a = verl_compute_advantage(single_turn(scores, uids), "rloo", config=AlgoConfig())
        b = verl_compute_advantage(single_turn(scores, uids), "kgym_rloo", config=AlgoConfig())
        torch.testing.assert_close(b.batch["advantages"], a.batch["advantages"], atol=1e-5,
                                   rtol=0)
        # verl's GRPO: (s - mean) / (std + 1e-6), a group of one has mean 0, std 1
        a = verl_compute_advantage(single_turn(scores, uids), "grpo", config=AlgoConfig(),
                                   norm_adv_by_std_in_grpo=True)
        b = verl_compute_advantage(single_turn(scores, uids), "kgym_grpo",
                                   config=AlgoConfig(norm_adv_by_std_in_grpo=True))
        torch.testing.assert_close(b.batch["advantages"], a.batch["advantages"], atol=1e-5,
                                   rtol=0)

    def test_kgym_rloo_refuses_multi_turn_rows():
        with pytest.raises(rl.KgymError, match="single-turn"):
            verl_compute_advantage(batch(REWARDS, SPANS, ["p"] * 3), "kgym_rloo",
                                   config=AlgoConfig())

    def test_mrs_and_prs_hooks():
        rm = batch(REWARDS, SPANS, ["p"] * 3).batch["response_mask"]
        rollout = torch.full((3, L), -1.0)
        old = rollout.clone()
        old[0] += 0.0002   # row 0: geometric ratio e^0.0002, kept
        old[1] += 0.003    # row 1: e^0.003 > 1.001, rejected whole
        old[2, 1] = -1.0 + np.log(1e-5)  # row 2: one token below the veto
        mask, keep = verl_hooks.mrs_response_mask(old, rollout, rm)
        assert keep == [[1, 1], [0, 0], [0]]
        assert torch.equal(mask[0], rm[0]) and mask[1].sum() == 0 and mask[2].sum() == 0
        # token mode: row 1's tokens are each e^0.003, out; row 0's in
        mask, keep = verl_hooks.mrs_response_mask(old, rollout, rm, mode="token")
        assert keep[0] == [1, 1] and keep[1] == [0, 0]
        ok = {"verdict": "correct", "profile": {"coverage": 0.9}, "timing": {"speedup": 1.0}}
        lazy = {"verdict": "correct", "profile": {"coverage": 0.1}, "timing": {"speedup": 1.0}}
        bad = {"verdict": "incorrect", "profile": None, "timing": None}
        mask, keep = verl_hooks.prs_response_mask([[ok, lazy], [bad, ok], [lazy]], rm)
        assert keep == [[1, 0], [1, 1], [0]]
        assert mask[0, 5:8].sum() == 0 and mask[0, 0:3].sum() == 3 and mask[2].sum() == 0

"""The judge's side of the timing protocol (kgym_harness.shared.timing.CrossTimer): the reference's arguments for a
call come from the input set the runner holds, scaled by the call's factor, whether the judge keeps that set
or builds it again for every call (sets of tasks.REBUILD_SET_BYTES and more)."""

import torch

from kgym_harness.shared import timing


def test_a_set_built_again_gives_the_same_arguments_as_a_kept_one():
    base = [torch.randn(5, 3), torch.arange(4), 7]
    built = []

    def build():
        built.append(1)
        return [base[0].clone(), base[1].clone(), 7]

    kept = timing.CrossTimer(None, None, [base], flush=False)
    again = timing.CrossTimer(None, None, [build], flush=False)
    again.random.seed(1)
    kept.random.seed(1)
    for _ in range(3):
        k1, s1, a1 = kept._next()
        k2, s2, a2 = again._next()
        assert (k1, s1) == (k2, s2) and 0.5 <= s1 < 2.0
        assert torch.equal(a1[0], a2[0]) and torch.equal(a1[0], base[0] * s1)
        assert torch.equal(a2[1], base[1]) and a2[2] == 7
    assert len(built) == 3  # a fresh build for every call
    assert torch.equal(base[0], torch.as_tensor(base[0]))  # the kept set itself is never scaled in place

"""The judge's side of the timing protocol (kgym_harness.shared.timing.CrossTimer), on the CPU with a stand-in for the
runner: every timed call gets a whole new input set drawn from the task with a seed nobody else knows, copied into
the runner's call block (or sent with the call when there is none); the block's canaries are read back after
every call; an output the runner describes as unlike the reference's is always checked."""

import torch

from kgym_harness.shared import timing, transport


class Remote:
    """The runner's part, as the judge sees it: records what each call got and answers a description."""

    def __init__(self, block=None, meta=None, scribble_at=None):
        self.block, self.meta, self.scribble_at = block, meta, scribble_at
        self.got = []

    def timed(self, values=None):
        args = values if values is not None else self.block.tensors
        self.got.append([a.clone() for a in args if torch.is_tensor(a)])
        if self.scribble_at is not None and len(self.got) == self.scribble_at:
            base = self.block.block.bytes()
            end = self.block.layout[0]["offset"] + self.block.tensors[0].numel() * 4
            base[end] = ~base[end]  # one byte past input 0
        return 1.0, 1.0, self.meta


def task_inputs(seeds):
    def make_inputs(seed):
        seeds.append(seed)
        g = torch.Generator().manual_seed(seed)
        return [torch.rand(4, 8, generator=g), torch.randint(0, 5, (3,), generator=g), 2]
    return make_inputs


def test_every_call_gets_a_new_set_the_runner_reads_from_the_block():
    seeds = []
    make = task_inputs(seeds)
    block, _views = transport.InPlace.make(make(1))
    remote = Remote(block)
    timer = timing.CrossTimer(None, remote, make, block=block, flush=False)
    sets = []
    for _ in range(4):
        args, send = timer._next()
        assert send is None  # the values are in the block, not in the message
        assert all(torch.equal(a, b) for a, b in zip(block.tensors, [args[0], args[1]]))
        sets.append(args[0].clone())
        remote.timed(send)
    assert len(set(seeds[1:])) == 4 and all(s >= 0 for s in seeds[1:])
    # No two calls' inputs are related: no constant ratio between any two sets (what a replay fingerprints).
    for i in range(4):
        for j in range(i + 1, 4):
            ratio = sets[j] / sets[i]
            assert float(ratio.max() / ratio.min()) > 1.5
    # Another timer draws other seeds (from the operating system's randomness, not a counter).
    other = []
    timing.CrossTimer(None, Remote(block), task_inputs(other), block=block, flush=False)._next()
    assert other[0] not in seeds


def test_without_a_block_the_values_go_with_each_call():
    seeds = []
    timer = timing.CrossTimer(None, Remote(), task_inputs(seeds), block=None, flush=False)
    args, send = timer._next()
    assert send is args
    # A set whose layout the block cannot hold (another shape) goes with its call too.
    block, _ = transport.InPlace.make([torch.zeros(2, 2)])
    timer = timing.CrossTimer(None, Remote(block), task_inputs(seeds), block=block, flush=False)
    args, send = timer._next()
    assert send is args and torch.equal(block.tensors[0], torch.zeros(2, 2))


def test_canaries_are_read_back_after_every_call():
    seeds = []
    make = task_inputs(seeds)
    block, _ = transport.InPlace.make(make(1))
    seen = []
    timer = timing.CrossTimer(None, Remote(block, meta=[], scribble_at=3), make, block=block, flush=False,
                              on_overwrite=lambda call, hits: seen.append((call, hits)))
    timer.warm(2)
    assert seen == []
    timer.round(3)
    assert len(seen) == 3 and seen[0][0] == 2  # the third call wrote past input 0, and the canary stays changed
    assert seen[0][1] == [{"input": 0, "offset": 128, "bytes": 1,
                           "block_offset": block.layout[0]["offset"] + 128}]
    assert timer.overhead["canaries_ms"] > 0


def test_an_output_described_unlike_the_references_is_always_checked():
    seeds = []
    make = task_inputs(seeds)
    block, _ = transport.InPlace.make(make(1))
    for meta, want in (("bad", 5), (None, 0)):
        checked = []
        timer = timing.CrossTimer(None, Remote(block, meta=meta), make, block=block, flush=False, check_every=0,
                                  on_pair=lambda call, args, ref, remote, m: checked.append((call, m)),
                                  ref_untimed=lambda *a: None, must_check=lambda m: m == "bad" or None)
        timer.round(5)
        assert len(checked) == want and all(m == meta for _c, m in checked)


def test_persisting_l2_reset_is_a_fact_never_an_error(monkeypatch):
    """Off CUDA the reset does nothing; a driver without the API (no libcuda here) or one whose reset fails
    is reported in the facts kgym reads, and the timing goes on."""
    cpu = timing.PersistingL2("cpu")
    cpu()
    assert cpu.facts() == {"max_bytes": 0, "reset": "not a CUDA device", "resets": 0, "set_aside_found": 0}
    if not torch.cuda.is_available():  # no CUDA driver on this machine: the reset's API is missing
        missing = timing.PersistingL2("cuda")
        missing()
        assert missing.facts()["reset"].startswith("ShareError") and missing.facts()["resets"] == 0

    from kgym_harness.shared import cudashare

    found = iter([0, 4 << 20, 0])
    monkeypatch.setattr(cudashare, "persisting_l2_max", lambda: 30 << 20)
    monkeypatch.setattr(cudashare, "reset_persisting_l2", lambda: next(found))
    l2 = timing.PersistingL2("cuda")
    for _ in range(3):
        l2()
    assert l2.facts() == {"max_bytes": 30 << 20, "reset": "ok", "resets": 3, "set_aside_found": 1}

    def broken():
        raise cudashare.ShareError("cuCtxResetPersistingL2Cache failed: CUDA_ERROR_NOT_SUPPORTED")

    monkeypatch.setattr(cudashare, "reset_persisting_l2", broken)
    l2()
    l2()  # no second attempt
    assert l2.facts()["reset"].startswith("ShareError: cuCtxResetPersistingL2Cache failed") and l2.resets == 3
    monkeypatch.setattr(cudashare, "persisting_l2_max", lambda: 0)
    none = timing.PersistingL2("cuda")
    none()
    assert none.facts()["reset"] == "not_needed"  # nothing can persist on this device (MIG, before sm_80)

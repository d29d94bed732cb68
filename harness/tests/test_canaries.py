"""Inputs handed over in place and the canaries around them (kgym_harness.transport.InPlace): on the CPU the
judge's inputs live in a shared memfd the runner maps, every byte of the block that belongs to no tensor holds
random bytes, and a write outside the tensors (a kernel storing past its input's end, or before its start) is
found by the judge after the answer, with the offset of the first changed byte from the nearest tensor."""

import gc
import os
import socket

import pytest
import torch
import triton
import triton.language as tl

from kgym_harness.shared import transport as tp


def runner_side(in_place, values):
    """What the runner receives when the judge sends ``values`` (the block's own views) in place."""
    a, b = socket.socketpair()
    tp.send(a, {"cmd": "call", "seq": 1}, values, in_place=in_place)
    reader = tp.Reader(b, "cpu", accept_blocks=True)
    msg, got = reader.recv()
    return msg, got, reader


def test_guarded_layout_leaves_canary_room_around_every_tensor():
    ts = [torch.zeros(3), torch.zeros(100, dtype=torch.float16), torch.zeros(0), torch.zeros(7, dtype=torch.int64)]
    layout, total = tp._layout(ts, guard=tp.GUARD)
    end = 0
    for t, spec in zip(ts, layout):
        assert spec["offset"] % 64 == 0 and spec["offset"] - end >= tp.GUARD
        end = spec["offset"] + t.numel() * t.element_size()
    assert total - end >= tp.GUARD
    # Messages that are not handed over in place keep the dense layout.
    assert tp._layout(ts)[0][0]["offset"] == 0


def test_tensors_in_place_lie_where_the_allocator_would_put_them():
    """A tensor handed over in place starts where PyTorch's caching allocator would start one of its size (2 MiB above
    1 MiB, else 512 bytes), as the reference's own tensors do in the judge: at GUARD bytes, level1/19's ReLU ran
    2.7% faster than on an allocator's tensor on an H200.  Canary room is kept before each and after the last."""
    ts = [torch.zeros(3), torch.zeros(1 << 18), torch.zeros(5, dtype=torch.int64), torch.zeros((1 << 18) + 1),
          torch.zeros(1 << 19)]
    layout, total = tp._layout(ts, guard=tp.GUARD)
    # above 1 MiB: a 2 MiB boundary; exactly 1 MiB is the allocator's small pool (kSmallSize), 512 bytes
    assert [spec["offset"] % (2 << 20) == 0 for spec in layout] == [False, False, False, True, True]
    assert all(spec["offset"] % 512 == 0 for spec in layout)
    end = 0
    for t, spec in zip(ts, layout):
        assert spec["offset"] - end >= tp.GUARD
        end = spec["offset"] + t.numel() * t.element_size()
    assert total - end >= tp.GUARD


def test_cpu_inputs_go_in_place_in_a_shared_memfd():
    """The runner's tensors are the judge's pages: a write there shows in the judge's views (and its
    fingerprint), nothing is copied, and the message names no device block."""
    x, y = torch.randn(5, 3), torch.arange(6)
    shared, args = tp.InPlace.make([x, 9, y])
    assert shared is not None and not shared.device and args[1] == 9
    assert torch.equal(args[0], x) and torch.equal(args[2], y) and shared.overwritten() == []
    shared.seal()
    msg, got, reader = runner_side(shared, args)
    assert reader.last_in_place and "_block" not in msg and got[1] == 9
    assert got[0].data_ptr() != x.data_ptr() and torch.equal(got[0], x)
    gc.collect()  # the runner's block object is gone; its views keep the mapping
    got[0][1, 2] = 1e6
    assert args[0][1, 2] == 1e6 and shared.changed() == [0] and shared.overwritten() == []
    got[2].add_(1)
    assert shared.changed() == [0, 1]  # indices among the tensors


def test_canaries_find_writes_outside_every_tensor_with_their_offset():
    x, y = torch.zeros(10), torch.zeros(4, dtype=torch.int64)
    shared, args = tp.InPlace.make([x, y])
    _msg, got, _r = runner_side(shared, args)
    base = shared.block.bytes()
    ox, oy = (spec["offset"] for spec in shared.layout)
    got[0].fill_(3.0)  # inside the tensors: no canary touched
    got[1].fill_(-1)
    assert shared.overwritten() == []
    base[ox + 40:ox + 48] = ~base[ox + 40:ox + 48]  # 8 bytes right past x's end (x is 40 bytes)
    base[ox - 2] = ~base[ox - 2]  # 2 bytes before x's start
    base[oy - 1] = ~base[oy - 1]  # right before y, in the same gap: counted with it
    base[shared.block.size - 1] = ~base[shared.block.size - 1]  # the block's last byte, far past y's end
    hits = shared.overwritten()
    assert hits == [{"input": 0, "offset": -2, "bytes": 1, "block_offset": ox - 2},
                    {"input": 0, "offset": 40, "bytes": 9, "block_offset": ox + 40},
                    {"input": 1, "offset": shared.block.size - 1 - oy, "bytes": 1, "block_offset": shared.block.size - 1}]
    # A gap is one region, named after the tensor nearer to its first changed byte: alone, a write right
    # before y is y's (a negative offset).
    base[ox + 40:ox + 48] = ~base[ox + 40:ox + 48]
    assert shared.overwritten()[1] == {"input": 1, "offset": -1, "bytes": 1, "block_offset": oy - 1}


def test_canaries_are_random_bytes_of_the_judge():
    """Two blocks of one layout get different canaries: a runner cannot know them without reading them."""
    one, _ = tp.InPlace.make([torch.zeros(4)])
    two, _ = tp.InPlace.make([torch.zeros(4)])
    assert not torch.equal(one.canaries.expected, two.canaries.expected)


def test_load_refills_the_views_only_with_the_same_layout():
    shared, args = tp.InPlace.make([torch.zeros(2, 3), 5])
    assert shared.load([torch.ones(2, 3), 5]) and torch.equal(args[0], torch.ones(2, 3))
    assert not shared.load([torch.full((3, 2), 7.0), 5]) and torch.equal(args[0], torch.ones(2, 3))
    assert not shared.load([torch.ones(2, 3, dtype=torch.float64), 5])
    assert not shared.load([torch.zeros(2, 3), 6]) and torch.equal(args[0], torch.ones(2, 3))  # another int
    assert shared.overwritten() == []


def test_in_place_host_memory_is_only_taken_from_the_judge_by_a_cpu_runner():
    shared, args = tp.InPlace.make([torch.zeros(4)])
    for reader_kwargs in ({"accept_blocks": False}, {"accept_blocks": True, "device": "cuda"}):
        a, b = socket.socketpair()
        tp.send(a, {"cmd": "call", "seq": 1}, args, in_place=shared)
        with pytest.raises(tp.ProtocolError):
            tp.Reader(b, **reader_kwargs).recv()


def test_an_unsealed_memfd_is_not_mapped_in_place():
    fd = os.memfd_create("kgym-test", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 4096)
    try:
        with pytest.raises(tp.ProtocolError):
            tp.HostBlock.open(fd)
    finally:
        os.close(fd)


@triton.jit
def _past_the_end(x_ptr, v_ptr, n, extra, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(x_ptr + offs, x * 2, mask=offs < n)
    tl.store(x_ptr + n + offs, tl.load(v_ptr + offs, mask=offs < extra, other=0), mask=offs < extra)


def test_an_interpreted_kernel_that_stores_past_its_tensor_is_caught():
    """Triton's interpreter stores to raw host addresses without bounds checks: a kernel writing past the end of
    a tensor that lies in the judge's memfd writes the block's canaries, which the judge finds."""
    shared, args = tp.InPlace.make([torch.ones(16, dtype=torch.int32)])
    _msg, got, _r = runner_side(shared, args)
    end = shared.layout[0]["offset"] + 64
    # What the kernel stores past the end differs from the canary in every byte, so all 12 bytes count.
    values = (~shared.block.bytes()[end:end + 12]).view(torch.int32).clone()
    _past_the_end[(1,)](got[0], values, 16, 0, BLOCK=16)
    assert torch.equal(args[0], torch.full((16,), 2, dtype=torch.int32)) and shared.overwritten() == []
    _past_the_end[(1,)](got[0], values, 16, 3, BLOCK=16)
    assert shared.overwritten() == [{"input": 0, "offset": 64, "bytes": 12, "block_offset": end}]


def test_a_kept_mapping_of_an_earlier_block_never_reaches_the_next_inputs():
    """Every command's inputs go in a block made for it (never one handed over before): the judge runs the reference
    on the inputs in that block, and only then hands it over.  A runner that keeps its mapping of an earlier
    variant's block (a hostile one need not let go) and writes through it after answering must not reach the next
    variant's inputs, or it could choose the inputs the reference runs on (docs/PERFORMANCE.md, twelfth session: why
    blocks are not reused).  A pool of blocks would fail this."""
    first, args = tp.InPlace.make([torch.zeros(64), torch.zeros(16)])
    _msg, got, reader = runner_side(first, args)
    kept = [t for t in got if torch.is_tensor(t)]  # the runner's views of the first block, kept
    first.release()
    del args
    gc.collect()
    for _ in range(8):  # the next variants, made after the first block was let go of by the judge
        nxt, views = tp.InPlace.make([torch.arange(64, dtype=torch.float32), torch.ones(16)])
        nxt.seal()
        for t in kept:
            t.fill_(-7.0)  # the runner writes through its old mapping
        assert torch.equal(views[0], torch.arange(64, dtype=torch.float32)) and torch.equal(views[1], torch.ones(16))
        assert nxt.changed() == [] and nxt.overwritten() == []
        assert not any(nxt.holds(t) for t in kept)
        nxt.release()
    del reader

"""GPU timing of a reference and a candidate: raw per-call times, nothing derived.

The protocol (docs/evaluation-protocol.md, "Timing"):
  - both models are timed in this one process, on the current stream, interleaved call by call
    (A B A B ...), so clock and thermal drift hit both alike;
  - ``warmup`` calls of each first (compilation, caches, allocator), then ``rounds`` rounds of ``iters``
    timed calls of each;
  - before every timed call the L2 cache is flushed by writing a buffer at least twice its size
    (not timed), so no call profits from the previous call's data in L2;
  - calls rotate among several pre-generated input sets, so no call sees the inputs of the previous one
    (a candidate that caches its result by input address or value gets no help from the timer);
  - each call is bracketed by CUDA events, with a device-wide synchronize before the end event is
    recorded, so work the candidate left on side streams is counted.
The C supervisor computes every statistic from the lists returned here, and stamps the begin/end
messages of each round with its own clock (a lower bound on real elapsed time the child cannot fake).
"""

import torch


def l2_bytes(device=None) -> int:
    props = torch.cuda.get_device_properties(device or torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)


class L2Flusher:
    """Writes a buffer of at least twice the L2 size: whatever a call left in L2 is evicted."""

    def __init__(self):
        self.nbytes = 2 * l2_bytes()
        self.buf = torch.empty(self.nbytes // 4, dtype=torch.int32, device="cuda")

    def __call__(self):
        self.buf.fill_(0x5A5A)


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if torch.is_tensor(t))


def input_set_count(inputs, wanted: int = 3) -> int:
    """How many input sets fit: each set is held twice (reference and candidate copies), and half the
    free memory is left for the models' own work."""
    need = 2 * max(1, _nbytes(inputs))
    free, _total = torch.cuda.mem_get_info()
    return max(1, min(wanted, int(0.5 * free) // need))


def time_pair(ref, cand, make_inputs, warmup: int = 10, rounds: int = 3, iters: int = 50,
              sets: int = 3, flush: bool = True, on_round=None):
    """Times ``ref`` and ``cand``.

    ``make_inputs(k)`` returns the k-th input set (a list), created on the GPU from its own seed; the
    reference and the candidate each get their own copy of every set.  ``on_round(i, "begin"|"end")``
    is called around each round (the child sends protocol messages from it).
    Returns {"rounds": [{"reference_ms": [...], "candidate_ms": [...]}], "input_sets": n,
    "flush_bytes": b, "warmup": w, "iters": i}.
    """
    first = make_inputs(0)
    n_sets = input_set_count(first, sets)
    ref_sets = [first] + [make_inputs(k) for k in range(1, n_sets)]
    cand_sets = [[x.clone() if torch.is_tensor(x) else x for x in s] for s in ref_sets]
    flusher = L2Flusher() if flush else None
    result = {"rounds": [], "input_sets": n_sets, "flush_bytes": flusher.nbytes if flusher else 0,
              "warmup": warmup, "iters": iters}
    with torch.no_grad():
        for i in range(warmup):
            ref(*ref_sets[i % n_sets])
            cand(*cand_sets[i % n_sets])
        torch.cuda.synchronize()
        call = 0
        for r in range(rounds):
            if on_round:
                on_round(r, "begin")
            times = {"reference_ms": [], "candidate_ms": []}
            for _ in range(iters):
                k = call % n_sets
                call += 1
                for model, args, key in ((ref, ref_sets[k], "reference_ms"), (cand, cand_sets[k], "candidate_ms")):
                    if flusher:
                        flusher()
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    torch.cuda.synchronize()
                    start.record()
                    model(*args)
                    torch.cuda.synchronize()  # side streams included
                    end.record()
                    end.synchronize()
                    times[key].append(start.elapsed_time(end))
            if on_round:
                on_round(r, "end")
            result["rounds"].append(times)
    return result

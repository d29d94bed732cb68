"""How a model is built, the same way on both sides: the reference in the judge (judge/child.py) and the
candidate's ``ModelNew`` in the runner (runner/runner.py) get identical weights when they create their
parameters in the same order.
"""

from __future__ import annotations

import copy

import torch


def construct(module_cls, init_inputs, seed: int, device: str, dtype: str | None = None):
    """``module_cls(*init_inputs)`` with parameters created on ``device`` right after torch.manual_seed(seed),
    so the reference and a candidate that creates its parameters in the same order get identical weights.
    ``dtype`` (e.g. "float16") casts the model afterwards.  init_inputs is copied: a model that mutates a
    list it is given must not change what the other model receives."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = module_cls(*copy.deepcopy(list(init_inputs)))
    if dtype is not None:
        model = model.to(getattr(torch, dtype))
    return model

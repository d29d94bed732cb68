"""Tests of kgym_harness.judge.tasks against real KernelBench files (and a few tiny hand-written tasks).

The exhaustive test over every level1/level2 task (~15 s) can be skipped with KGYM_SKIP_EXHAUSTIVE=1.
"""

import glob
import os
import textwrap
import time

import pytest
import torch

from kgym_harness.judge import tasks
from kgym_harness.shared import models

KERNELBENCH = os.environ.get("KGYM_KERNELBENCH", "/work/shared/kernelbench")  # as in conftest.py

BUDGET = 65536


def write_task(tmp_path, body, name="task.py"):
    path = tmp_path / name
    path.write_text("import torch\nimport torch.nn as nn\n" + textwrap.dedent(body))
    return str(path)


def snapshot(module):
    return {k: v for k, v in vars(module).items() if isinstance(v, (int, float, tuple)) and not k.startswith("__")}


# ------------------------------------------------------------------------------------------ loading

def test_load_task_registers_module(load):
    m = load("level1/19_ReLU.py")
    import sys
    assert sys.modules[m.__name__] is m
    assert callable(m.get_inputs) and m.Model


def test_load_task_missing_names(tmp_path):
    path = write_task(tmp_path, "def get_inputs():\n    return []\n")
    with pytest.raises(tasks.TaskError, match="Model.*get_init_inputs"):
        tasks.load_task(path, "kgym_test_missing")


def test_load_task_import_error(tmp_path):
    path = write_task(tmp_path, "raise RuntimeError('boom')\n")
    with pytest.raises(tasks.TaskError, match="boom"):
        tasks.load_task(path, "kgym_test_broken")


def test_int_constants_file_order_no_bools_no_imports(tmp_path):
    path = write_task(tmp_path, """
        from os import SEEK_END          # an imported int: not the task's constant
        class Model(nn.Module):
            def forward(self, x):
                return x
        zeta = 7
        flag = True
        alpha = 3
        height = width = 5
        depth, rows = 2, 9
        eps = 1e-5
        shape = (zeta, 1)
        def get_inputs():
            return [torch.rand(zeta, alpha)]
        def get_init_inputs():
            return []
        """)
    m = tasks.load_task(path, "kgym_test_ints")
    assert list(tasks.int_constants(m).items()) == [
        ("zeta", 7), ("alpha", 3), ("height", 5), ("width", 5), ("depth", 2), ("rows", 9)]


# ----------------------------------------------------------------------------------- size constants

# (task, constants that must be size constants, ints that must not be)
SIZE_CASES = [
    ("level1/19_ReLU.py", {"batch_size", "dim"}, set()),
    ("level1/1_Square_matrix_multiplication_.py", {"N"}, set()),
    ("level1/3_Batched_matrix_multiplication.py", {"batch_size", "m", "k", "n"}, set()),
    ("level1/23_Softmax.py", {"batch_size", "dim"}, set()),
    ("level1/35_GroupNorm_.py", {"batch_size", "features", "dim1", "dim2"}, {"num_groups"}),
    ("level1/40_LayerNorm.py", {"batch_size", "features", "dim1", "dim2"}, set()),
    ("level1/41_Max_Pooling_1D.py", {"batch_size", "features", "sequence_length"}, {"padding"}),
    ("level1/47_Sum_reduction_over_a_dimension.py", {"batch_size", "dim1", "dim2"}, {"reduce_dim"}),
    ("level1/51_Argmax_over_a_dimension.py", {"batch_size", "dim1", "dim2"}, {"dim"}),
    ("level1/63_conv_standard_2D__square_input__square_kernel.py",
     {"batch_size", "in_channels", "out_channels", "kernel_size", "width", "height"}, set()),
    ("level1/72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_.py",
     {"in_channels", "out_channels", "depth", "height", "width", "kernel_size[2]"}, set()),
    ("level1/85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py",
     {"batch_size", "in_channels", "height", "width"}, {"out_channels", "groups"}),  # both unused / derived
    ("level1/89_cumsum.py", {"batch_size", "input_shape[0]"}, {"dim"}),
    ("level1/95_CrossEntropyLoss.py", {"batch_size", "num_classes"}, {"dim"}),  # input_shape follows num_classes
    ("level1/97_ScaledDotProductAttention.py",
     {"batch_size", "num_heads", "sequence_length", "embedding_dimension"}, set()),
    ("level1/100_HingeLoss.py", {"batch_size", "input_shape[0]"}, set()),  # coupled by a broadcast
    ("level2/11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm.py",
     {"batch_size", "in_channels", "out_channels", "height", "width"}, {"num_groups", "groups"}),
    ("level2/16_ConvTranspose2d_Mish_Add_Hardtanh_Scaling.py",
     {"batch_size", "in_channels", "out_channels", "height", "width"}, {"scale"}),
    ("level2/21_Conv2d_Add_Scale_Sigmoid_GroupNorm.py", {"batch_size", "out_channels", "height"}, {"num_groups"}),
    ("level2/62_Matmul_GroupNorm_LeakyReLU_Sum.py", {"batch_size", "input_size", "hidden_size"}, {"num_groups"}),
    ("level2/76_Gemm_Add_ReLU.py", {"batch_size", "in_features", "out_features"}, set()),
    ("level2/100_ConvTranspose3d_Clamp_Min_Divide.py",
     {"batch_size", "in_channels", "out_channels", "depth", "height", "width"}, set()),
]


@pytest.mark.parametrize("rel,must,must_not", SIZE_CASES, ids=[c[0].split("/")[1][:30] for c in SIZE_CASES])
def test_size_constants(load, rel, must, must_not):
    m = load(rel)
    before = snapshot(m)
    sc = tasks.size_constants(m)
    assert must <= set(sc), f"missing {must - set(sc)} in {sc}"
    assert not (must_not & set(sc)), f"structural constants taken as sizes: {must_not & set(sc)}"
    assert all(v >= 2 for v in sc.values())
    assert snapshot(m) == before


def test_relu_exact(load):
    assert tasks.size_constants(load("level1/19_ReLU.py")) == {"batch_size": 4096, "dim": 393216}


def test_structural_dim_excluded(tmp_path):
    # dim = 2 is a reduction axis: doubling it to 4 is out of range for a 3-D input.
    path = write_task(tmp_path, """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.dim = dim
            def forward(self, x):
                return x.sum(self.dim)
        batch = 64
        rows = 32
        cols = 48
        dim = 2
        def get_inputs():
            return [torch.rand(batch, rows, cols)]
        def get_init_inputs():
            return [dim]
        """)
    m = tasks.load_task(path, "kgym_test_dim")
    assert tasks.size_constants(m) == {"batch": 64, "rows": 32, "cols": 48}


# ------------------------------------------------------------------------------------------ planning

def _largest(module, plan):
    variant = tasks.Variant("t", dict(plan), 0, "none", None, "")
    init, inputs = tasks.build(module, variant, "cpu")
    model = models.construct(module.Model, init, 0, "cpu")
    with torch.no_grad():
        out = model(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    tensors = [t for t in inputs + outs if isinstance(t, torch.Tensor)] + list(model.parameters()) \
        + list(model.buffers())
    return max(t.numel() for t in tensors), inputs


def test_plan_budget_relu(load):
    m = load("level1/19_ReLU.py")
    plan = tasks.plan_sizes(m, BUDGET)
    assert set(plan) == {"batch_size", "dim"}
    assert plan["batch_size"] * plan["dim"] <= BUDGET
    assert plan["batch_size"] >= 64 and plan["dim"] >= 64  # halving the largest first keeps both dims sizable
    assert plan.notes == []


def test_plan_conv_keeps_kernel(load):
    m = load("level1/63_conv_standard_2D__square_input__square_kernel.py")
    plan = tasks.plan_sizes(m, BUDGET)
    assert plan["kernel_size"] == 3 and plan["height"] < 1024 and plan["width"] < 1024
    assert _largest(m, plan)[0] <= BUDGET


def test_plan_full_size_and_scale(load):
    m = load("level1/19_ReLU.py")
    assert dict(tasks.plan_sizes(m, None)) == {"batch_size": 4096, "dim": 393216}
    large = tasks.plan_sizes(m, None, scale=2.0)
    small = tasks.plan_sizes(m, None, scale=0.5)
    assert large["batch_size"] * large["dim"] == 2 * 4096 * 393216
    assert small["batch_size"] * small["dim"] == 4096 * 393216 // 2


def test_device_footprint_elementwise_and_matmul(load):
    # ReLU: one float32 input and an output of the same size, no parameters.  Correctness: I + 4O; timing
    # (the judge's call block, the call's set, get_inputs' temporaries while the next is drawn): 3I + 2O;
    # both 5 tensors' bytes.
    m = load("level1/19_ReLU.py")
    n = 4096 * 393216 * 4
    assert tasks.device_footprint(m, dict(tasks.plan_sizes(m, None))) == 5 * n
    # It follows the sizes it is given (the arbiter reserves for the largest variant).
    assert tasks.device_footprint(m, {"batch_size": 16, "dim": 1024}) == 5 * 16 * 1024 * 4
    # A GEMM: two inputs (I = 2t) and an output (t): correctness 2t + 4t, timing 3 x 2t + 2t.
    g = load("level1/1_Square_matrix_multiplication_.py")
    size = tasks.size_constants(g)["N"]
    t = size * size * 4
    assert tasks.device_footprint(g, {"N": size}) == 8 * t
    # A reduction: the output is tiny, the timing stage's input copies are what counts.
    r = load("level1/47_Sum_reduction_over_a_dimension.py")
    vals = dict(tasks.plan_sizes(r, None))
    inp = tasks._analyse(r).probe(r, vals).in_bytes
    assert 3 * inp <= tasks.device_footprint(r, vals) < 3 * inp + (1 << 26)
    # Each stage's own figure (the arbiter reserves them in turn: child.py reserve_for): the reduction's
    # correctness holds one input set, its timing three; ReLU's two stages need the same; the footprint is
    # the larger.
    feet = tasks.stage_footprints(r, vals)
    assert inp <= feet["correctness"] < inp + (1 << 26) and feet["timing"] == tasks.device_footprint(r, vals)
    assert tasks.stage_footprints(m, {"batch_size": 16, "dim": 1024}) == {"correctness": 5 * 16 * 1024 * 4,
                                                                         "timing": 5 * 16 * 1024 * 4}


def test_device_footprint_unknown_is_zero(tmp_path):
    path = write_task(tmp_path, """
        class Model(nn.Module):
            def forward(self, x):
                return x
        def get_inputs():
            raise RuntimeError("no inputs on any device")
        def get_init_inputs():
            return []
    """)
    m = tasks.load_task(path, "kgym_test_footprint")
    assert tasks.device_footprint(m, {}) == 0


def test_plan_restores_constants(load):
    m = load("level1/95_CrossEntropyLoss.py")
    before = snapshot(m)
    tasks.plan_sizes(m, BUDGET, odd=True)
    tasks.make_variants(m, "cpu", BUDGET)
    assert snapshot(m) == before and m.input_shape == (4096,)


def test_sizes_rederives_dependent_constants(load):
    m = load("level1/95_CrossEntropyLoss.py")
    with tasks.sizes(m, {"batch_size": 8, "num_classes": 10}):
        assert m.input_shape == (10,)
        preds, targets = m.get_inputs()
        assert preds.shape == (8, 10) and int(targets.max()) < 10
    assert m.input_shape == (4096,) and m.batch_size == 32768


def test_plan_is_fast(load):
    m = load("level2/11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm.py")
    tasks.plan_sizes(load("level1/19_ReLU.py"), BUDGET)  # first meta op imports parts of torch: warm up
    # CPU time, not wall time: a loaded CI machine stretches the wall (1.14-1.6 s measured at load 5-9 on 2 cores,
    # the twenty-fifth session's flakiness audit), not the work.
    start = time.process_time()
    tasks.plan_sizes(m, BUDGET)
    assert time.process_time() - start < 1.0  # typically ~0.1 s


def test_the_plan_does_not_depend_on_the_machines_speed(load, monkeypatch):
    """Whether the meta forward validates the sizes is decided by its operation count (SLOW_META_OPS), not by a
    clock: level3/16's plan (and so its verdict) followed the machine's load when it was 0.5 s of wall time."""
    t = [0.0]

    def slow_clock():
        t[0] += 10.0  # every reading ten seconds later: the slowest machine there is
        return t[0]

    for name in ("perf_counter", "process_time", "monotonic", "time"):
        monkeypatch.setattr(time, name, slow_clock)
    a = tasks._analyse(load("level3/34_VanillaRNNHidden.py"))  # 2,049 operations with torch 2.13
    ops = a.cache[()].ops
    assert a.forward and not a.notes and 1000 < ops <= tasks.SLOW_META_OPS, (a.forward, a.notes, ops)
    monkeypatch.setattr(tasks, "SLOW_META_OPS", ops - 1)
    b = tasks._analyse(load("level3/34_VanillaRNNHidden.py"))
    assert not b.forward and f"too long there: {ops} operations, over {ops - 1}" in b.notes[0], b.notes


def test_plan_budget_sample(load):
    for rel in ["level1/3_Batched_matrix_multiplication.py", "level1/43_Max_Pooling_3D.py",
                "level1/100_HingeLoss.py", "level2/21_Conv2d_Add_Scale_Sigmoid_GroupNorm.py",
                "level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py"]:
        m = load(rel)
        assert _largest(m, tasks.plan_sizes(m, BUDGET))[0] <= BUDGET, rel


ODD_TASKS = ["level1/19_ReLU.py", "level1/35_GroupNorm_.py", "level1/97_ScaledDotProductAttention.py",
             "level2/21_Conv2d_Add_Scale_Sigmoid_GroupNorm.py", "level1/100_HingeLoss.py",
             "level2/62_Matmul_GroupNorm_LeakyReLU_Sum.py"]


@pytest.mark.parametrize("rel", ODD_TASKS)
@pytest.mark.parametrize("budget", [BUDGET, None])
def test_odd_sizes(load, rel, budget):
    m = load(rel)
    plain = tasks.plan_sizes(m, budget)
    odd = tasks.plan_sizes(m, budget, odd=True)
    changed = {n for n in odd if odd[n] != plain[n]}
    assert changed, "some size constant must change"
    for n in changed:
        assert odd[n] % 16 != 0 and odd[n] < plain[n]
    for n, v in plain.items():  # every even constant >= 8 changed, unless no valid value exists
        if v >= 8 and v % 2 == 0 and n not in changed:
            assert any(n in note for note in odd.notes)
    if budget is not None:
        _largest(m, odd)  # the real forward runs at those sizes


def test_odd_respects_groupnorm(load):
    m = load("level1/35_GroupNorm_.py")
    odd = tasks.plan_sizes(m, BUDGET, odd=True)
    assert odd["features"] % 8 == 0 and odd["features"] % 16 != 0  # 8 groups divide it


def test_meta_fallback(tmp_path):
    # .item() cannot run on the meta device: sizes are validated on inputs/parameters only.
    path = write_task(tmp_path, """
        class Model(nn.Module):
            def forward(self, x):
                return x * float(x.sum().item())
        batch = 512
        dim = 1024
        def get_inputs():
            return [torch.rand(batch, dim)]
        def get_init_inputs():
            return []
        """)
    m = tasks.load_task(path, "kgym_test_fallback")
    plan = tasks.plan_sizes(m, 4096)
    assert plan["batch"] * plan["dim"] <= 4096
    assert any("meta device" in n for n in plan.notes)


def test_describe_plan(load):
    text = tasks.describe_plan(tasks.plan_sizes(load("level1/19_ReLU.py"), BUDGET))
    assert "batch_size=256 (was 4096)" in text and "largest tensor" in text


# ------------------------------------------------------------------------------------------ variants

def _variants(m, **kw):
    return {v.name: v for v in tasks.make_variants(m, "cpu", BUDGET, **kw)}


def test_variant_set(load):
    vs = _variants(load("level1/19_ReLU.py"), half_precision=["fp16", "bf16"])
    # Cheap first (the judge stops at the first variant that fails the stage): base, small_odd (the commonest
    # bug's), the value variants at capped sizes, then the sizes at full scale; half precision last.
    assert list(vs) == ["base", "small_odd", "scaled_x2", "seed_1", "small_values", "tiny_values", "large_values",
                        "mixed_large", "offset", "signed", "size_small", "size_odd", "size_large", "size_long",
                        "fp16", "bf16"]
    assert vs["seed_1"].seed != vs["base"].seed
    assert vs["fp16"].dtype == "float16" and vs["bf16"].dtype == "bfloat16"
    base = vs["base"].sizes
    assert vs["size_large"].sizes["batch_size"] * vs["size_large"].sizes["dim"] <= 2 * BUDGET
    assert vs["size_large"].sizes != base and vs["size_small"].sizes != base
    # size_long keeps the row (dim) long and shrinks the batch instead; its inputs are signed.
    long = vs["size_long"]
    assert long.sizes["dim"] > base["dim"] and long.sizes["batch_size"] < base["batch_size"]
    assert long.sizes["batch_size"] * long.sizes["dim"] <= BUDGET and long.transform == "signed"


def test_small_odd_is_signed_and_falls_back(load):
    """small_odd: odd sizes within the CPU budget with signed inputs, on CPU and GPU; where the reference cannot
    take signed inputs the judge runs it on rand inputs (plain_fallback) unless that repeats a planned variant."""
    m = load("level1/19_ReLU.py")
    for budget, device in ((BUDGET, "cpu"), (None, "cuda")):
        planned = tasks.make_variants(m, device, budget)
        vs = {v.name: v for v in planned}
        odd = vs["small_odd"]
        assert odd.transform == "signed" and odd.seed == vs["base"].seed and "signed inputs" in odd.description
        assert odd.sizes["batch_size"] * odd.sizes["dim"] <= tasks.DEFAULT_CPU_BUDGET
        assert all(v % 16 for v in odd.sizes.values() if v >= 8)
        plain = tasks.plain_fallback(odd, planned)
        if budget is None:
            assert plain.transform == "none" and plain.sizes == odd.sizes and plain.name == "small_odd"
            assert "NaN/Inf on signed" in plain.description
        else:
            assert plain is None  # the CPU's size_odd has these very sizes, seed and (rand) inputs
    assert tasks.plain_fallback(vs["signed"], planned) is None and tasks.plain_fallback(vs["base"], planned) is None
    # A larger CPU budget: size_odd is larger, so the fallback adds the small odd sizes.
    planned = tasks.make_variants(m, "cpu", 4 * BUDGET)
    odd = next(v for v in planned if v.name == "small_odd")
    assert tasks.plain_fallback(odd, planned) is not None
    built = tasks.build(m, odd, "cpu")[1][0]
    assert (built < 0).any() and (built > 0).any()


def test_gpu_variants(load):
    """Full sizes: no size_long (rows are already long), small_odd present, size_large only below 2**31."""
    m = load("level1/19_ReLU.py")
    vs = {v.name: v for v in tasks.make_variants(m, "cuda", None)}
    assert "size_long" not in vs and "small_odd" in vs
    assert vs["small_odd"].sizes["batch_size"] * vs["small_odd"].sizes["dim"] <= BUDGET
    assert all(v % 16 for v in vs["small_odd"].sizes.values() if v >= 8)
    # 4096 x 393216 doubled is 3.2e9 elements: past 32-bit offsets, so no size_large.
    assert "size_large" not in vs
    m = load("level2/40_Matmul_Scaling_ResidualAdd.py")
    assert "size_large" in {v.name for v in tasks.make_variants(m, "cuda", None)}


def test_gpu_value_variants_are_capped(load):
    """Full sizes: scaled_x2 and seed_1 test values, so a 1.6G-element task runs them at <= 2**24 elements a
    tensor; base and signed keep the task's sizes; a task already under the cap keeps its sizes throughout."""
    m = load("level1/19_ReLU.py")
    vs = {v.name: v for v in tasks.make_variants(m, "cuda", None)}
    full = vs["base"].sizes["batch_size"] * vs["base"].sizes["dim"]
    assert full > 2**30 and vs["signed"].sizes == vs["base"].sizes
    for name in ("scaled_x2", "seed_1"):
        capped = vs[name].sizes["batch_size"] * vs[name].sizes["dim"]
        assert 2**20 < capped <= tasks.VALUE_VARIANT_BUDGET, (name, vs[name].sizes)
        assert "batch_size=" in vs[name].description or "dim=" in vs[name].description
    assert vs["seed_1"].seed == vs["base"].seed + 1 and vs["scaled_x2"].transform == "scale2"
    m = load("level1/1_Square_matrix_multiplication_.py")  # 4096 x 4096: exactly 2**24 elements a tensor
    vs = {v.name: v for v in tasks.make_variants(m, "cuda", None)}
    assert vs["scaled_x2"].sizes == vs["base"].sizes == vs["seed_1"].sizes


def test_size_variant_identical_to_base_is_dropped(load):
    vs = _variants(load("level1/50_conv_standard_2D__square_input__square_kernel.py"))
    # batch_size is the only size constant and is already at its floor of 2.
    assert "size_small" not in vs and "size_odd" not in vs and "size_large" not in vs
    # small_odd at base's sizes with signed inputs would repeat signed.
    assert "small_odd" not in vs and "signed" in vs


def test_variants_deterministic(load):
    m = load("level2/21_Conv2d_Add_Scale_Sigmoid_GroupNorm.py")
    vs = _variants(m)
    init1, in1 = tasks.build(m, vs["base"], "cpu")
    init2, in2 = tasks.build(m, vs["base"], "cpu")
    _, other = tasks.build(m, vs["seed_1"], "cpu")
    assert init1 == init2 and torch.equal(in1[0], in2[0]) and not torch.equal(in1[0], other[0])
    a = models.construct(m.Model, init1, 42, "cpu")
    b = models.construct(m.Model, init1, 42, "cpu")
    c = models.construct(m.Model, init1, 43, "cpu")
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb)
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters()) if pa.numel() > 1)


def test_transforms_leave_integers_alone(load):
    m = load("level1/95_CrossEntropyLoss.py")
    vs = _variants(m, half_precision=["bf16"])
    _, (pred, target) = tasks.build(m, vs["base"], "cpu")
    _, (pred2, target2) = tasks.build(m, vs["scaled_x2"], "cpu")
    _, (pred_s, target_s) = tasks.build(m, vs["signed"], "cpu")
    _, (pred_h, target_h) = tasks.build(m, vs["bf16"], "cpu")
    assert target.dtype == torch.int64
    assert torch.equal(target, target2) and torch.equal(target, target_s) and torch.equal(target, target_h)
    assert torch.equal(pred2, pred * 2)
    assert pred.min() >= 0 and pred_s.min() < 0 and pred_s.shape == pred.shape
    assert pred_h.dtype == torch.bfloat16 and target_h.dtype == torch.int64


def test_value_range_variants(load):
    """Same sizes and seed as scaled_x2, inputs moved to other magnitudes; integers untouched; at full (GPU)
    sizes capped like scaled_x2."""
    m = load("level1/95_CrossEntropyLoss.py")
    vs = _variants(m)
    _, (pred, target) = tasks.build(m, vs["base"], "cpu")
    built = {n: tasks.build(m, vs[n], "cpu")[1] for n in ("small_values", "tiny_values", "large_values",
                                                           "mixed_large", "offset")}
    # On the CPU they run at a quarter of the budget: smaller than base, the same for all five.
    quarter = tasks.plan_sizes(m, BUDGET // 4)
    _, (pred_q, target_q) = tasks.build(m, tasks.Variant("q", dict(quarter), vs["base"].seed, "none", None, ""), "cpu")
    assert pred_q.numel() < pred.numel()
    for name, (p, t) in built.items():
        assert vs[name].sizes == dict(quarter) and vs[name].seed == vs["base"].seed, name
        assert tasks.is_value_range(vs[name].transform) and torch.equal(t, target_q), name
        assert tasks._changed(quarter, vs["base"].sizes) in vs[name].description, name  # says how it shrank
    assert torch.equal(built["small_values"][0], pred_q * 1e-3)
    assert torch.equal(built["tiny_values"][0], pred_q * 1e-25) and built["tiny_values"][0].max() < 1e-24
    assert torch.equal(built["large_values"][0], pred_q * 100)
    assert torch.equal(built["offset"][0], pred_q + 100)
    big = built["mixed_large"][0]
    assert big.min() < -50 and big.max() > 50 and big.shape == pred_q.shape
    assert not tasks.is_value_range("scale2") and not tasks.is_value_range("signed")
    with pytest.raises(ValueError):
        tasks.build(m, tasks.Variant("x", vs["base"].sizes, 42, "squash:2", None, ""), "cpu")
    full = {v.name: v for v in tasks.make_variants(load("level1/19_ReLU.py"), "cuda", None)}
    assert all(full[n].sizes == full["scaled_x2"].sizes != full["base"].sizes
               for n, _t, _d in tasks.VALUE_RANGES)


def test_build_uses_sizes_and_restores(load):
    m = load("level1/97_ScaledDotProductAttention.py")
    before = snapshot(m)
    v = tasks.Variant("x", {"batch_size": 2, "num_heads": 3, "sequence_length": 5, "embedding_dimension": 7},
                      1, "none", None, "")
    _, (q, k, v_) = tasks.build(m, v, "cpu")
    assert q.shape == (2, 3, 5, 7) and snapshot(m) == before


def test_construct_dtype_and_copy(load):
    m = load("level2/76_Gemm_Add_ReLU.py")
    init = [8, 4, (4,)]
    model = models.construct(m.Model, init, 0, "cpu", dtype="float16")
    assert all(p.dtype == torch.float16 for p in model.parameters()) and init == [8, 4, (4,)]


# -------------------------------------------------------------------------- exhaustive (opt-in)

ALL_TASKS = sorted(os.path.relpath(p, KERNELBENCH) for level in ("level1", "level2")
                   for p in glob.glob(os.path.join(KERNELBENCH, level, "*.py")))

# Tasks that cannot reach the budget; the plan says so in its notes (see the tasks module docstring).
UNSHRINKABLE = {
    "level1/50_conv_standard_2D__square_input__square_kernel.py": 600_000,   # 3x224x224 image as literals
    "level2/3_ConvTranspose3d_Sum_LayerNorm_AvgPool_GELU.py": 2 * BUDGET,    # LayerNorm ties width to channels
    "level2/34_ConvTranspose3d_LayerNorm_GELU_Scaling.py": 2 * BUDGET,
}


@pytest.mark.exhaustive
@pytest.mark.skipif(os.environ.get("KGYM_SKIP_EXHAUSTIVE") == "1", reason="KGYM_SKIP_EXHAUSTIVE=1")
@pytest.mark.parametrize("rel", ALL_TASKS)
def test_exhaustive_plan(load, rel):
    m = load(rel)
    start = time.process_time()  # CPU time, as in test_plan_is_fast
    plan = tasks.plan_sizes(m, BUDGET)
    assert time.process_time() - start < 2.0  # < 0.2 s once torch is warm; the first task pays ~1 s of imports
    limit = UNSHRINKABLE.get(rel, BUDGET)
    assert plan.max_numel <= limit and (plan.max_numel <= BUDGET) == (not plan.notes)
    for v in tasks.make_variants(m, "cpu", BUDGET):
        if v.name in ("scaled_x2", "seed_1", "signed") or tasks.is_value_range(v.transform):
            continue  # the base sizes again
        start = time.process_time()
        largest, _ = _largest(m, v.sizes)
        assert time.process_time() - start < 2.0, v.name
        assert largest <= (2 * limit if v.name == "size_large" else limit), v.name
    # Input structure: found exactly where get_inputs() builds it (no property seen by chance), quickly.
    start = time.process_time()
    kinds = [s.kinds for s in tasks.input_structure(m)]
    assert time.process_time() - start < 2.0
    assert kinds == STRUCTURED.get(rel, [()] * len(kinds)), kinds


def test_device_footprint_counts_the_references_largest_intermediate(tmp_path):
    """The reference's intermediates (abs(x) of an L1 norm) are held by the judge beside the timing's call
    block, the call's set and the outputs: they count.  Views of the inputs (a reshape) are not new memory."""
    norm = tasks.load_task(write_task(tmp_path, """
        N = 64
        D = 1024
        class Model(nn.Module):
            def forward(self, x):
                return x / torch.sum(torch.abs(x), dim=1, keepdim=True)
        def get_inputs():
            return [torch.randn(N, D)]
        def get_init_inputs():
            return []
    """, "norm.py"), "kgym_test_fp_norm")
    t = 64 * 1024 * 4
    # Timing: 3I + 2O + X = 6 tensors; correctness I + 4O = 5.
    assert tasks.device_footprint(norm, {"N": 64, "D": 1024}) == 6 * t
    view = tasks.load_task(write_task(tmp_path, """
        N = 64
        D = 1024
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x.reshape(D, N))
        def get_inputs():
            return [torch.randn(N, D)]
        def get_init_inputs():
            return []
    """, "view.py"), "kgym_test_fp_view")
    assert tasks.device_footprint(view, {"N": 64, "D": 1024}) == 5 * t


# -------------------------------------------------------------------------- input structure

# Every level1/level2 task whose get_inputs() states a structure (the rest draw plain rand/randn): kept by
# every variant.  The exhaustive test below checks that detection finds exactly these.
STRUCTURED = {
    "level1/13_Matmul_for_symmetric_matrices.py": [("symmetric",), ("symmetric",)],
    "level1/14_Matmul_for_upper_triangular_matrices.py": [("zero_lower",), ("zero_lower",)],
    "level1/15_Matmul_for_lower_triangular_matrices.py": [("zero_upper",), ("zero_upper",)],
    "level1/93_masked_cumsum.py": [(), ("integer",)],
    "level1/95_CrossEntropyLoss.py": [(), ("integer",)],
    "level1/98_KLDivLoss.py": [("rows_sum_to_one",), ("rows_sum_to_one",)],
    "level1/100_HingeLoss.py": [(), ("integer_valued",)],
}

_SYNTHETIC = """
    n = 16
    class Model(nn.Module):
        def forward(self, p, s, q, d, a, r, y):
            return p.sum() + s.sum() + q.sum() + d.sum() + a.sum() + r.sum() + y.sum()
    def get_inputs():
        x = torch.rand(n, n)
        p = x @ x.T + n * torch.eye(n)                   # symmetric positive definite
        s = torch.sort(torch.rand(4, n), dim=-1).values  # sorted rows
        q = torch.softmax(torch.rand(4, n), dim=0)        # columns summing to one
        d = torch.diag(torch.rand(n))                      # diagonal
        a = torch.randn(4, n).abs()                        # non-negative because of abs
        r = torch.rand(4, n)                               # torch.rand's [0, 1): no structure
        y = (torch.rand(4, n) > 0.5).float()               # a 0/1 mask as floats
        return [p, s, q, d, a, r, y]
    def get_init_inputs():
        return []
"""



def test_the_timers_inputs_skip_the_structure_check(tmp_path):
    """The timer draws an input set per timed call (judge/child.py make_inputs): those are the task's own inputs,
    unchecked (keep_structure=False), the same values where the structure holds; a transformed variant always keeps
    the structure."""
    m = tasks.load_task(write_task(tmp_path, _SYNTHETIC, "synthetic.py"), "kgym_test_structure_timer")
    variants = _all_variants(m)
    base = next(v for v in variants if v.transform == "none" and v.name == "base")
    checked = tasks.build(m, base, "cpu")[1]
    raw = tasks.build(m, base, "cpu", keep_structure=False)[1]
    assert all(torch.equal(a, b) for a, b in zip(checked, raw))
    signed = next(v for v in variants if v.transform != "none")
    with pytest.raises(ValueError):
        tasks.build(m, signed, "cpu", keep_structure=False)

def _all_variants(m):
    return tasks.make_variants(m, "cpu", BUDGET, half_precision=["fp16"])


def test_structure_detected_in_kernelbench_tasks(load):
    for rel, kinds in STRUCTURED.items():
        found = tasks.input_structure(load(rel))
        assert [s.kinds for s in found] == kinds, rel
    hinge = tasks.input_structure(load("level1/100_HingeLoss.py"))[1]
    assert hinge.frozen and (hinge.low, hinge.high) == (-1.0, 1.0)
    targets = tasks.input_structure(load("level1/95_CrossEntropyLoss.py"))[1]
    assert targets.frozen and targets.low >= 0 and targets.high < 4096  # the index bounds seen
    assert all(not s.kinds for s in tasks.input_structure(load("level1/19_ReLU.py")))


@pytest.mark.parametrize("rel", sorted(STRUCTURED))
def test_every_variant_keeps_the_structure(load, rel):
    """Signed, offset, value ranges, sizes: each variant's inputs have the structure the task states, and a
    transformed variant's description says so."""
    m = load(rel)
    structures = tasks.input_structure(m)
    base = None
    for v in _all_variants(m):
        _init, inputs = tasks.build(m, v, "cpu")
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        for st in structures:
            assert st.holds(tensors[st.index]), (v.name, st.index)
        if v.name == "base":
            base = tensors
        elif v.transform != "none" and any(s.kinds for s in structures):
            assert "structure kept: " + tasks.describe_structure(structures) in v.description, v.name
        if v.name == "signed":
            for st in structures:
                t = tensors[st.index]
                if st.frozen:  # labels and indices never change
                    assert torch.equal(t, base[st.index])
                elif st.kinds != ("rows_sum_to_one",):  # dense matrices would have replaced these
                    assert t.min() < 0


def test_synthetic_structures_are_detected_and_kept(tmp_path):
    m = tasks.load_task(write_task(tmp_path, _SYNTHETIC, "synthetic.py"), "kgym_test_structure_synth")
    found = tasks.input_structure(m)
    assert [s.kinds for s in found] == [("symmetric", "positive_definite"), ("sorted",), ("rows_sum_to_one",),
                                        ("diagonal",), ("non_negative",), (), ("integer_valued",)]
    assert found[2].dim == -2 and found[6].frozen and not found[5].kinds
    for v in _all_variants(m):
        _init, inputs = tasks.build(m, v, "cpu")
        for st in found:
            assert st.holds(inputs[st.index]), (v.name, st.index, st.kinds)
        if v.transform in ("signed", "signed_scale:100"):
            p = inputs[0].double()
            assert (p < 0).any() and bool((torch.linalg.eigvalsh(p) > 0).all())  # signed, still definite
            assert inputs[5].min() < 0  # rand's non-negativity is not kept: that is what signed tests
            assert inputs[4].min() >= 0 and inputs[1].min() < 0
    # the descriptor the timing code reuses: a perturbed input projected back onto its structure
    _init, inputs = tasks.build(m, tasks.Variant("base", {}, 42, "none", None, ""), "cpu")
    for st, t in zip(found, inputs):
        if st.frozen:
            with pytest.raises(ValueError):
                st.impose(t)
            continue
        noisy = t * (1 + 0.3 * torch.randn(t.shape))
        assert st.holds(st.impose(noisy)), st.kinds
        assert st.scale_safe == (st.kinds != ("rows_sum_to_one",))


def test_a_structure_that_cannot_be_kept_skips_the_variant(load, monkeypatch):
    m = load("level1/14_Matmul_for_upper_triangular_matrices.py")
    vs = {v.name: v for v in _all_variants(m)}
    monkeypatch.setattr(tasks.InputStructure, "impose", lambda self, x: x)  # a transform that keeps nothing
    with pytest.raises(tasks.StructureNotKept, match="upper triangular"):
        tasks.build(m, vs["signed"], "cpu")
    tasks.build(m, vs["base"], "cpu")  # the task's own inputs are never second-guessed
    tasks.build(m, vs["size_odd"], "cpu")


def test_build_draws_what_torch_manual_seed_would(load):
    """build seeds only the generators get_inputs draws from here (torch.manual_seed also formats a stack trace for
    every device type not started, about 1 ms: the timing draws a set per call), and the inputs are the same."""
    import torch

    m = load("level1/95_CrossEntropyLoss.py")  # floats and class indices
    v = tasks.Variant("base", dict(tasks.plan_sizes(m, 4096)), 7, "none", None, "")
    _init, got = tasks.build(m, v, "cpu")
    with tasks.sizes(m, v.sizes):
        torch.manual_seed(tasks.input_seed(7))
        want = m.get_inputs()
    assert len(got) == 2 and all(torch.equal(a, b) for a, b in zip(got, want))


# ------------------------------------------------------------------------------- randomness in forward

_RANDOM_FORWARDS = {
    # forward body -> expected handling
    "return self.bn(x) * 2": "none",
    "return self.drop(self.bn(x))": "dropout_as_identity",
    "return self.drop2(x[:, :, None, None])[:, :, 0, 0] + self.bn(x)": "dropout_as_identity",
    "return nn.functional.dropout(x, 0.3, training=True)": "refused",
    "return x + 0.01 * torch.randn_like(x)": "refused",
    "return torch.bernoulli(torch.sigmoid(x))": "refused",
    "return self.rrelu(x)": "refused",
    "return self.drop(x) + torch.rand(1)": "refused",
    "return nn.functional.dropout(x, 0.0, training=True)": "none",
    # an operator that may draw (dropout_p) and does not: no draw
    "return nn.functional.scaled_dot_product_attention(x[None], x[None], x[None])[0]": "none",
    # output that changes between calls without a random operator (state kept across calls)
    "self.bn.bias.data += 1\n                return self.bn(x)": "refused",
}


@pytest.mark.parametrize("body", list(_RANDOM_FORWARDS))
def test_forward_randomness(tmp_path, body):
    """Random draws in the reference's forward are found by the operators that draw (tag nondeterministic_seeded)
    and by two runs on different random states; dropout modules alone are judged in eval mode (the identity),
    anything else refuses the task.  BatchNorm keeps its training mode (batch statistics) either way."""
    path = write_task(tmp_path, f"""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = nn.BatchNorm1d(dim)
                self.drop = nn.Dropout(0.5)
                self.drop2 = nn.Dropout2d(0.5)
                self.rrelu = nn.RReLU()
            def forward(self, x):
                {body}
        batch = 64
        dim = 32
        def get_inputs():
            return [torch.rand(batch, dim)]
        def get_init_inputs():
            return []
        """)
    m = tasks.load_task(path, "kgym_test_random")
    found = tasks.forward_randomness(m, "cpu", budget=4096)
    assert found["handling"] == _RANDOM_FORWARDS[body], found
    if found["handling"] == "refused":
        assert "random" in found["reason"] and (found["ops"] or found["differs"]), found
    if found["handling"] == "dropout_as_identity":
        assert found["modules"] and found["ops"], found
        model = models.construct(m.Model, [], 42, "cpu")
        assert tasks.dropout_off(model) == ["drop", "drop2"]
        assert not model.drop.training and model.bn.training  # only dropout changes mode
        x = torch.rand(64, 32)
        with torch.no_grad():
            torch.manual_seed(1)
            a = model(x)
            torch.manual_seed(2)
            b = model(x)
        assert torch.equal(a, b)


def test_forward_randomness_of_the_fixture_tasks():
    """The fixture tasks kgym's integration tests evaluate (tests/fixtures/tasks): add_one draws nothing,
    add_one_dropout is judged with its dropout off, add_one_noise is refused."""
    root = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "tasks")
    want = {"add_one": "none", "add_one_dropout": "dropout_as_identity", "add_one_noise": "refused"}
    for name, handling in want.items():
        m = tasks.load_task(os.path.join(root, name + ".py"), "kgym_test_fixture_" + name)
        assert tasks.forward_randomness(m, "cpu")["handling"] == handling, name


def test_the_ties_variant_rounds_the_task_inputs_so_rows_tie():
    """tasks.TIES (index outputs: Evaluation.correctness adds it): the task's own inputs rounded down to multiples
    of 1/4, range and sign kept, so an argmax row of a few dozen elements ties."""
    import torch

    t = torch.rand(8, 64)
    v = tasks.ties_variant({"n": 64}, 42)
    assert (v.name, v.transform, v.dtype) == ("ties", "ties", None)
    r = tasks._plain(t, "ties")
    assert torch.equal(r, torch.floor(t * 4) / 4) and r.min() >= 0 and r.max() < 1
    ties = (r == r.max(dim=1, keepdim=True).values).sum(dim=1)
    assert bool((ties > 1).all())
    assert not tasks.is_value_range("ties")

"""shared/constants.py sizes as the runner applies it to a candidate's module (runner._module_sizes): the variant's
sizes while ModelNew is built, for the names the module binds itself only, and its own values back afterwards."""

import types

from kgym_harness.runner import runner


def _module(tmp_path, src):
    path = tmp_path / "candidate.py"
    path.write_text(src)
    m = types.ModuleType("kgym_candidate_test")
    m.__file__ = str(path)
    exec(compile(src, str(path), "exec"), m.__dict__)
    return m


def test_the_candidates_own_sizes_take_the_variants_values_while_it_is_built(tmp_path):
    m = _module(tmp_path, "batch_size = 64\ndim = 8\nrows = batch_size * 2\n\n\ndef H():\n    return 'fn'\n")
    with runner._module_sizes(m, {"batch_size": 47, "dim": 3, "H": 5, "W": 9, "shape[1]": 3, "flag": True}):
        # its own constants, and what depends on them, re-run; a name it binds otherwise (a function) or not at
        # all keeps what it is; a bool is not a size
        assert (m.batch_size, m.dim, m.rows, m.H()) == (47, 3, 94, "fn")
        assert not hasattr(m, "W") and not hasattr(m, "shape") and not hasattr(m, "flag")
    assert (m.batch_size, m.dim, m.rows) == (64, 8, 128)


def test_nothing_is_touched_without_sizes_or_a_file(tmp_path):
    m = _module(tmp_path, "batch_size = 64\n")
    for sizes in (None, {}, {"other": 3}):
        with runner._module_sizes(m, sizes):
            assert m.batch_size == 64
    bare = types.ModuleType("bare")
    bare.batch_size = 64
    with runner._module_sizes(bare, {"batch_size": 47}):
        assert bare.batch_size == 64

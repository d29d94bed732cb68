"""The trust boundary in the tree: the runner (kgym_harness/runner/, the candidate's process) and the modules both
sides use (kgym_harness/shared/) import nothing of the judge (kgym_harness/judge/), directly or through another
module; and shared/ imports nothing of the runner.  The judge's reference, tolerances and comparison are then not
in the code the runner runs, and a change that makes the runner depend on the judge fails here.

The import graph is read from the source (ast), not from a running interpreter: an import inside a function runs
only on some paths (the runner's imports are mostly lazy), and it counts all the same.  Every ``import`` and
``from ... import`` anywhere in a module is an edge, relative ones resolved against the module's package, and
so is ``importlib.import_module`` / ``__import__`` of a constant name; importing a module imports its parent
packages too.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]  # harness/
PACKAGE = "kgym_harness"


def _modules():
    """Dotted name -> (source path, is a package) for every module of the harness."""
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join(parts)] = (path, is_pkg)
    return out


MODULES = _modules()


def _parents(name):
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _harness_module(name):
    """The harness module ``name`` is, or lies in (an attribute of a module: ``from .report import _finite``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name, source=None):
    """The harness modules module ``name`` imports (its parent packages included), from its source."""
    path, is_pkg = MODULES[name]
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"), str(path))
    package = name if is_pkg else name.rpartition(".")[0]
    targets = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                assert base.count(".") == package.count(".") - (node.level - 1), (name, ast.dump(node))
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            targets.append(base)
            targets += [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if called in ("import_module", "__import__"):
                targets.append(node.args[0].value)
    found = set()
    for t in targets:
        if t == PACKAGE or t.startswith(PACKAGE + "."):
            mod = _harness_module(t)
            if mod:
                found.add(mod)
                found.update(_parents(mod))
    found.discard(name)
    return found


def reached_from(starts, graph):
    """Every module reachable from ``starts`` -> the chain of imports that reaches it."""
    chains = {s: [s] for s in starts}
    todo = list(starts)
    while todo:
        cur = todo.pop()
        for nxt in sorted(graph(cur)):
            if nxt not in chains:
                chains[nxt] = chains[cur] + [nxt]
                todo.append(nxt)
    return chains


def _in(pkg, name):
    return name == f"{PACKAGE}.{pkg}" or name.startswith(f"{PACKAGE}.{pkg}.")


def _side(pkg):
    return [m for m in MODULES if _in(pkg, m)]


def _crossings(starts, forbidden, graph=imports_of):
    return sorted(" -> ".join(chain) for mod, chain in reached_from(starts, graph).items() if _in(forbidden, mod))


def test_the_three_packages_exist_and_the_graph_sees_imports():
    # Not vacuous: the walk finds the runner's real imports (a lazy one among them) and the judge's of shared/.
    for pkg in ("judge", "runner", "shared"):
        assert _side(pkg), pkg
    assert f"{PACKAGE}.shared.transport" in imports_of(f"{PACKAGE}.runner.runner")
    assert f"{PACKAGE}.shared.report" in imports_of(f"{PACKAGE}.runner.runner")  # inside Runner.serve
    assert f"{PACKAGE}.runner.guards" in imports_of(f"{PACKAGE}.runner.runner")
    assert f"{PACKAGE}.shared.cudashare" in imports_of(f"{PACKAGE}.shared.transport")
    assert f"{PACKAGE}.judge.compare" in imports_of(f"{PACKAGE}.judge.child")
    assert f"{PACKAGE}.judge.child" in imports_of(f"{PACKAGE}.zygote")


def test_runner_and_shared_import_nothing_of_the_judge():
    assert _crossings(_side("runner") + _side("shared"), "judge") == []


def test_shared_imports_nothing_of_the_runner():
    assert _crossings(_side("shared"), "runner") == []


@pytest.mark.parametrize("line", [
    "        from ..judge.child import describe_exception\n",  # relative, inside a function
    "        from ..judge import tasks\n",
    "        import kgym_harness.judge.compare\n",  # absolute
    "        from .. import zygote\n",  # through a module that imports the judge
    "        importlib.import_module('kgym_harness.judge.policy')\n",
])
def test_a_judge_import_in_the_runner_is_caught(line):
    """The check fails on each way the runner could reach the judge (the runner's source with one line added to
    a function, read as if it were the file)."""
    name = f"{PACKAGE}.runner.runner"
    path, _ = MODULES[name]
    text = path.read_text(encoding="utf-8")
    anchor = "    def check(self, msg):\n"
    assert text.count(anchor) == 1
    changed = text.replace(anchor, anchor + line)

    def graph(mod):
        return imports_of(mod, changed) if mod == name else imports_of(mod)

    assert _crossings([name], "judge", graph) != []
    assert _crossings([name], "judge") == []


def test_a_runner_import_in_shared_is_caught():
    name = f"{PACKAGE}.shared.report"
    path, _ = MODULES[name]
    changed = path.read_text(encoding="utf-8") + "\n\ndef _late():\n    from ..runner import guards\n"

    def graph(mod):
        return imports_of(mod, changed) if mod == name else imports_of(mod)

    assert _crossings([name], "runner", graph) != []
    assert _crossings([name], "judge", graph) == []

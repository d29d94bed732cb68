"""A module's top-level constants given other values for a while (``sizes``), for both sides of the process
boundary: the judge gives a task's module a variant's sizes (judge.tasks: inputs, the reference's construction)
and the runner gives the candidate's module the same ones while its model is built (runner.py construct), since
a model may read a module-level size in its __init__ (KernelBench's level3/33 sizes its hidden state by
``batch_size``).  The source is read from the module's file; its top-level ``name = expr`` statements that
depend on a changed name are re-run, in file order.  Nothing here imports the candidate's code or runs anything
but the module's own top-level expressions."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import types
import weakref


# ------------------------------------------------------------------------------- top-level assignments

@dataclasses.dataclass
class _Assignment:
    targets: list          # AST target nodes (Name, or Tuple/List of Names); several for a = b = 1
    names: list            # every name it binds
    code: types.CodeType   # the value expression, compiled for eval
    deps: set              # names the expression reads


# Per-module caches (weak, so a reloaded task does not see stale results).
_ASSIGNMENTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _target_names(node):
    """Names bound by an assignment target, or None when it binds something else (attribute, star)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        names = []
        for elt in node.elts:
            sub = _target_names(elt)
            if sub is None:
                return None
            names += sub
        return names
    return None


def _assignments(module) -> list:
    """The file's top-level ``name = expr`` statements, in order (the source is read from module.__file__)."""
    if module in _ASSIGNMENTS:
        return _ASSIGNMENTS[module]
    with open(module.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read(), module.__file__)
    result = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue  # augmented assignments and the like are not replayed (none occur in KernelBench)
        names = [_target_names(t) for t in targets]
        if any(n is None for n in names):
            continue
        expr = ast.Expression(node.value)
        result.append(_Assignment(
            targets=targets, names=[n for ns in names for n in ns],
            code=compile(expr, module.__file__, "eval"),
            deps={n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}))
    _ASSIGNMENTS[module] = result
    return result


def _bind(target, value, put):
    """Assign ``value`` to an AST target the way Python would (tuple targets unpack)."""
    if isinstance(target, ast.Name):
        put(target.id, value)
    else:
        values = list(value)
        if len(values) != len(target.elts):
            raise ValueError("cannot unpack when replaying the task's assignments")
        for t, v in zip(target.elts, values):
            _bind(t, v, put)


_MISSING = object()


@contextlib.contextmanager
def sizes(module, values: dict, bound_only: bool = False):
    """Temporarily give the module's constants ``values`` (and re-derive what depends on them).

    Use it around anything that reads the constants: get_inputs()/get_init_inputs() (``build`` does that
    itself), and, for tasks whose Model reads module globals (none in level1/2, some in level3), around
    construction and forward too.  ``bound_only``: only the names the module's own top-level assignments bind
    get a value (a candidate's module: a function or kernel named like a size, ``W``, keeps what it is); without
    it a name no statement binds is set too.
    """
    namespace = vars(module)
    saved = {}
    elements = {}  # "shape[1]": 7 -> {"shape": {1: 7}}: elements of literal int tuples
    for key, value in values.items():
        if key.endswith("]") and "[" in key:
            name, index = key[:-1].split("[")
            elements.setdefault(name, {})[int(index)] = value

    def put(name, value):
        if name not in saved:
            saved[name] = namespace.get(name, _MISSING)
        namespace[name] = value

    try:
        changed = set()
        for a in _assignments(module):
            if a.deps & changed or elements.keys() & a.names:
                value = eval(a.code, namespace)  # noqa: S307 - the task's own expression, re-run with new inputs
                for t in a.targets:
                    _bind(t, value, put)
                changed.update(a.names)
            for name in a.names:
                if name in values:
                    put(name, values[name])
                    changed.add(name)
                if name in elements and isinstance(namespace[name], (tuple, list)):
                    old = namespace[name]
                    put(name, type(old)(elements[name].get(i, x) for i, x in enumerate(old)))
        for name, value in values.items():  # names no statement binds (not expected, but honour them)
            if not bound_only and name not in saved and "[" not in name:
                put(name, value)
        yield module
    finally:
        for name, value in saved.items():
            if value is _MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = value

"""The static reward-hack policy: an ``ast`` walk over the candidate module.

The rules are data (``policy/default.json``, passed down by kgym in the job as ``policy``); this module only
applies them and reports findings, each ``{"type", "line", "name", "message"}``.  The verdict is kgym's (C):
the policy's ``findings`` map says which types are hacks.  See docs/threat-model.md for why each rule exists.

Names are resolved through the module's imports, so ``F.relu``, ``from torch import matmul as mm`` and
``import torch.nn.functional as F`` all become canonical dotted names (``torch.nn.functional.relu``).
Static checks are a first, cheap layer with line numbers; obfuscation (``getattr`` with computed names, code
in strings) is either forbidden here too or caught by the runtime checks in ``guards``.
"""

import ast
import json
import os

_MUTATING_METHODS = {"append", "extend", "insert", "update", "setdefault", "add", "pop", "popitem", "clear",
                     "remove", "discard", "__setitem__", "appendleft"}
_CACHE_DECORATORS = {"functools.cache", "functools.lru_cache", "functools.cached_property", "cache", "lru_cache"}


def default_policy_path():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "policy", "default.json")


def load_default():
    """The repository's default policy; {} when it is missing (then only structural checks run)."""
    try:
        with open(default_policy_path(), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def severity(policy, kind):
    return (policy.get("findings") or {}).get(kind, "hack")


def _is_jit(node):
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = ast.unparse(target)
        if name.split(".")[-1] in ("jit", "autotune", "heuristics") and (
                name.startswith(("triton", "tl")) or name in ("jit", "autotune", "heuristics")):
            return True
    return False


class _Checker(ast.NodeVisitor):
    def __init__(self, policy):
        self.p = policy
        self.findings = []
        self.aliases = {}          # local name -> canonical dotted name ("F" -> "torch.nn.functional")
        self.modules = set()       # local names bound to modules (for monkey patching)
        self.jit_names = set()
        self.scope = []            # stack of ("forward"|"init"|"kernel"|"class", node)
        self.mutable_globals = {}  # name -> line
        self.nn_attrs = {}         # self.<attr> assigned an nn module in __init__ -> class name
        fwd = policy.get("forward") or {}
        self.torch_allowed = {"torch." + n for n in fwd.get("torch_allowed", [])}
        self.methods_forbidden = set(fwd.get("tensor_methods_forbidden", []))
        self.forbidden_modules = policy.get("forbidden_modules", [])
        self.forbidden_calls = set(policy.get("forbidden_calls", []))
        self.forbidden_attrs = policy.get("forbidden_attributes", [])
        self.forbidden_names = set(policy.get("forbidden_attribute_names", []))
        # Exceptions to the forbidden prefixes (e.g. triton.runtime.driver for device properties).
        self.allowed = policy.get("allowed_attributes", [])
        self.reported = set()

    # -- helpers -------------------------------------------------------------------------------------------
    def add(self, kind, node, name, message):
        key = (kind, getattr(node, "lineno", 0))  # one finding of a kind per line is enough evidence
        if key in self.reported or severity(self.p, kind) == "off":
            return
        self.reported.add(key)
        self.findings.append({"type": kind, "line": getattr(node, "lineno", 0), "name": name, "message": message})

    def dotted(self, node):
        """Canonical dotted name of a Name/Attribute chain, or None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def in_forward(self):
        return any(kind == "forward" for kind, _ in self.scope) and not self.in_kernel()

    def in_kernel(self):
        return any(kind == "kernel" for kind, _ in self.scope)

    @staticmethod
    def _matches(name, prefixes):
        return any(name == p or name.startswith(p + ".") for p in prefixes)

    def check_module(self, name, node):
        if self._matches(name, self.allowed):
            return
        if self._matches(name, self.forbidden_modules):
            self.add("forbidden_import", node, name, f"importing {name} is not allowed")

    # -- imports --------------------------------------------------------------------------------------------
    def visit_Import(self, node):
        for a in node.names:
            self.check_module(a.name, node)
            local = a.asname or a.name.split(".")[0]
            self.aliases[local] = a.name if a.asname else a.name.split(".")[0]
            self.modules.add(local)

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if node.level:
            self.add("forbidden_import", node, "." * node.level + mod, "relative imports are not allowed")
        self.check_module(mod, node)
        for a in node.names:
            full = f"{mod}.{a.name}" if mod else a.name
            if a.name == "*":
                self.add("forbidden_import", node, full, f"`from {mod} import *` is not allowed")
                continue
            self.check_module(full, node)
            self.aliases[a.asname or a.name] = full
            self.check_attr_name(full, node)

    # -- scopes ---------------------------------------------------------------------------------------------
    def visit_FunctionDef(self, node):
        if _is_jit(node):
            self.jit_names.add(node.name)
            kind = "kernel"
        elif node.name == "__init__":
            kind = "init"
        else:
            kind = "forward"
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = self.dotted(target) or ""
            if name in _CACHE_DECORATORS:
                self.add("state_cache", dec, name, f"@{name} caches results across calls")
        self.scope.append((kind, node))
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self.generic_visit(node)

    def visit_ClassDef(self, node):
        for base in node.bases:
            name = self.dotted(base) or ""
            if name in ("torch.Tensor", "Tensor") or name.endswith(".Tensor"):
                self.add("forbidden_attribute", node, name,
                         f"class {node.name} subclasses torch.Tensor: outputs must be plain tensors")
            if name == "Model" or name.startswith("kgym_reference"):
                self.add("torch_call", node, name, f"class {node.name} inherits the reference Model")
        self.scope.append(("class", node))
        self.generic_visit(node)
        self.scope.pop()

    # -- module state ---------------------------------------------------------------------------------------
    def visit_Global(self, node):
        self.add("state_cache", node, ", ".join(node.names),
                 f"`global {', '.join(node.names)}`: functions may not keep state in module globals")

    visit_Nonlocal = visit_Global

    def visit_Assign(self, node):
        self._assign(node, node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self._assign(node, [node.target], node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._assign(node, [node.target], node.value)
        self.generic_visit(node)

    def _assign(self, node, targets, value):
        if not self.scope:
            mutable = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp))
            if isinstance(value, ast.Call):
                fname = (self.dotted(value.func) or "").split(".")[-1]
                mutable = fname in ("dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter")
            for t in targets:
                if isinstance(t, ast.Name) and mutable:
                    self.mutable_globals[t.id] = node.lineno
        for t in targets:
            root = t
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(t, (ast.Attribute, ast.Subscript)) and isinstance(root, ast.Name):
                if root.id in self.modules or root.id in self.aliases and root.id != "self":
                    target = self.dotted(t) if isinstance(t, ast.Attribute) else ast.unparse(t)
                    self.add("monkey_patch", node, target or root.id,
                             f"assigning to {ast.unparse(t)} changes a library or module object")
                elif root.id in self.mutable_globals and self.scope:
                    self.add("state_cache", node, root.id,
                             f"writes module-level {root.id} (defined line {self.mutable_globals[root.id]}): "
                             "no state may be kept across calls")
                elif (root.id == "self" and isinstance(t, ast.Subscript) and self.in_forward()):
                    self.add("state_cache", node, ast.unparse(t),
                             f"stores into {ast.unparse(t.value)} during forward: no results may be cached")
            # self.x = nn.Linear(...) in __init__: remember the module, its call in forward is torch compute.
            # Containers (Sequential, ModuleList) hold the candidate's own Triton modules as often as PyTorch's:
            # calling one is no evidence; the runtime ATen check sees what the contained modules run.
            if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                    and isinstance(value, ast.Call)):
                cname = self.dotted(value.func) or ""
                if cname.startswith("torch.nn.") and cname.split(".")[-1] not in (
                        "Parameter", "ParameterList", "ParameterDict", "Buffer", "Sequential", "ModuleList", "ModuleDict"):
                    self.nn_attrs[t.attr] = cname

    # -- expressions ----------------------------------------------------------------------------------------
    def check_attr_name(self, name, node):
        if self._matches(name, self.allowed):
            return False
        if self._matches(name, self.forbidden_attrs):
            self.add("forbidden_attribute", node, name, f"{name} is not allowed")
            return True
        if self.p.get("private_module_attributes", True):
            parts = name.split(".")
            if parts[0] in ("torch", "triton", "numpy", "os", "sys") and any(
                    x.startswith("_") and not x.startswith("__") for x in parts[1:]):
                self.add("forbidden_attribute", node, name, f"{name}: private library internals are not allowed")
                return True
        return False

    def visit_Attribute(self, node):
        if node.attr in self.forbidden_names:
            self.add("forbidden_attribute", node, node.attr, f"the attribute {node.attr} is not allowed")
        name = self.dotted(node)
        if name:
            self.check_attr_name(name, node)
        self.generic_visit(node)

    def visit_Name(self, node):
        canonical = self.aliases.get(node.id)
        if canonical and canonical != node.id:
            self.check_attr_name(canonical, node)
        if node.id in self.forbidden_names:
            self.add("forbidden_attribute", node, node.id, f"the name {node.id} is not allowed")

    def visit_Try(self, node):
        if node.handlers and self.in_forward():
            self.add("try_except", node, "try",
                     "try/except around the forward: a failing kernel may not fall back to other code")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_BinOp(self, node):
        if isinstance(node.op, ast.MatMult) and self.in_forward() and (self.p.get("forward") or {}).get(
                "matmul_operator", True):
            self.add("torch_call", node, "@", "the @ operator computes a matrix product in PyTorch")
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        name = self.dotted(func)
        if isinstance(func, ast.Name) and func.id in self.forbidden_calls and func.id not in self.aliases:
            self.add("forbidden_call", node, func.id, f"{func.id}() is not allowed")
        if isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "delattr", "hasattr"):
            args = node.args
            if len(args) >= 2 and not (isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)):
                self.add("dynamic_attribute", node, func.id,
                         f"{func.id}() with a computed attribute name is not allowed")
            elif len(args) >= 2:
                attr = args[1].value
                if attr in self.forbidden_names:
                    self.add("forbidden_attribute", node, attr, f"the attribute {attr} is not allowed")
                base = self.dotted(args[0])
                if base:
                    self.check_attr_name(f"{base}.{attr}", node)
            if func.id in ("setattr", "delattr") and args and not (
                    isinstance(args[0], ast.Name) and args[0].id == "self"):
                self.add("monkey_patch", node, func.id, f"{func.id}() on anything but self is not allowed")
        if self.in_forward() and name:
            self.check_forward_call(node, name)
        elif self.in_forward() and isinstance(func, ast.Attribute) and func.attr in self.methods_forbidden:
            self.add("torch_call", node, "." + func.attr,
                     f".{func.attr}() computes in PyTorch inside forward; write it in Triton")
        self.generic_visit(node)

    def check_forward_call(self, node, name):
        root = name.split(".")[0]
        if root in ("torch",):
            if name.startswith("torch.Tensor.") and name.split(".")[-1] in self.methods_forbidden:
                self.add("torch_call", node, name, f"{name} computes in PyTorch inside forward")
            elif name not in self.torch_allowed and not self._matches(name, self.forbidden_attrs):
                self.add("torch_call", node, name,
                         f"{name}() inside forward: only allocation, views, shape queries and dtype/device moves "
                         "may use torch; the computation must be done by your Triton kernels")
            return
        if root in ("tl", "triton") or name in self.jit_names:
            return
        parts = name.split(".")
        if parts[0] == "self" and len(parts) == 2 and parts[1] in self.nn_attrs:
            self.add("torch_call", node, name,
                     f"calling {name} ({self.nn_attrs[parts[1]]}) runs PyTorch's implementation; keep the module "
                     "only for its parameters and compute with Triton")
        elif parts[0] == "super" or (len(parts) >= 2 and parts[-1] == "forward" and parts[0] != "self"):
            self.add("torch_call", node, name, f"{name} calls another module's forward")
        elif len(parts) >= 2 and parts[-1] in self.methods_forbidden and parts[0] not in self.modules:
            self.add("torch_call", node, name,
                     f".{parts[-1]}() computes in PyTorch inside forward; write it in Triton")

    def finish(self):
        self.findings.sort(key=lambda f: (f["line"], f["type"]))
        return self.findings


def check(tree, policy):
    """Findings of the static policy on a parsed module (a list, possibly empty)."""
    c = _Checker(policy or {})
    # Imports first (anywhere in the file), so aliases are known wherever they are used.
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if isinstance(node, ast.Import):
                    c.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                    c.modules.add(a.asname or a.name.split(".")[0])
                elif a.name != "*":
                    c.aliases[a.asname or a.name] = f"{node.module}.{a.name}" if node.module else a.name
        if isinstance(node, ast.FunctionDef) and _is_jit(node):
            c.jit_names.add(node.name)
    # nn modules assigned in __init__ (anywhere), before forward bodies are visited.
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
                    for t in sub.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            cname = c.dotted(sub.value.func) or ""
                            if cname.startswith("torch.nn.") and cname.split(".")[-1] not in (
                                    "Parameter", "ParameterList", "ParameterDict", "Buffer", "Sequential", "ModuleList", "ModuleDict"):
                                c.nn_attrs[t.attr] = cname
    # Module-level mutable containers, before function bodies that may write them.
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            c.scope = []
            value = node.value
            mutable = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp))
            if isinstance(value, ast.Call):
                mutable = (c.dotted(value.func) or "").split(".")[-1] in (
                    "dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter")
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and mutable:
                    c.mutable_globals[t.id] = node.lineno
    c.visit(tree)
    # Mutating method calls on module-level containers from inside functions.
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                        and sub.func.attr in _MUTATING_METHODS and isinstance(sub.func.value, ast.Name)
                        and sub.func.value.id in c.mutable_globals):
                    n = sub.func.value.id
                    c.add("state_cache", sub, n, f"{n}.{sub.func.attr}() changes module-level {n} "
                          f"(defined line {c.mutable_globals[n]}): no state may be kept across calls")
    return c.finish()

"""What both sides of an evaluation report the same way: an exception as facts, a number made JSON-safe, an
error recognised as running out of memory.

The judge (judge/child.py) reports them to kgym; the runner (runner/runner.py) reports them to the judge,
which passes the runner's description of the candidate's exception on unchanged (``RemoteError``).  They
live here, not in the judge, so that the runner imports nothing of the judge (tests/test_boundary.py).
"""

import traceback


def _finite(x):
    """JSON has no NaN/Infinity: report them as strings."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return str(x)
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


class RemoteError(Exception):
    """The candidate raised in the runner: ``facts`` is the runner's description of it."""

    def __init__(self, facts):
        self.facts = facts if isinstance(facts, dict) else {"type": "Error", "message": str(facts)}
        super().__init__(f"{self.facts.get('type')}: {self.facts.get('message')}")


def describe_exception(exc):
    """The exception as facts: type, message and every frame of the chain."""
    if isinstance(exc, RemoteError):
        return exc.facts
    frames = []
    seen = set()
    cur = exc
    chain = []
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    # Innermost cause last: the candidate's own line is usually deepest.
    for item in reversed(chain):
        for fs in traceback.extract_tb(item.__traceback__):
            frames.append({"file": fs.filename, "line": fs.lineno, "function": fs.name,
                           "code": (fs.line or "")[:300]})
    compile_error = False
    try:
        from triton.compiler.errors import CompilationError

        compile_error = any(isinstance(e, CompilationError) for e in chain)
    except Exception:
        pass
    message = str(exc)
    if len(message) > 4000:
        message = message[:2000] + "\n...\n" + message[-1500:]
    root = chain[-1] if chain else exc
    return {
        "type": type(exc).__name__,
        "module": type(exc).__module__,
        "message": message,
        "cause_type": type(root).__name__ if root is not exc else None,
        "cause_message": str(root)[:2000] if root is not exc else None,
        "frames": frames[-40:],
        "triton_compile": compile_error,
    }


# What an allocation failure says: torch.OutOfMemoryError from the CUDA allocator; "CUDA error: out of memory" from a
# library or Triton's launcher; on the host, torch's "DefaultCPUAllocator: can't allocate memory ... Error code 12
# (Cannot allocate memory)" and Python's MemoryError.  The host's were missed before (twenty-first session): on the
# CPU a float64 run of the small-elements check that could not allocate was read as the task's reference refusing
# float64 (judge/child.py _reference_runs), the check was skipped, and a cut cumprod passed while the host's memory
# was short.
_OUT_OF_MEMORY = ("OutOfMemoryError", "out of memory", "MemoryError", "can't allocate memory",
                  "Cannot allocate memory")


def says_out_of_memory(text: str) -> bool:
    """Whether an error's type or message names running out of memory (_OUT_OF_MEMORY)."""
    return any(k in text for k in _OUT_OF_MEMORY)


def is_out_of_memory(exc) -> bool:
    return says_out_of_memory(f"{type(exc).__name__} {exc}")

"""The candidate's checked bytes as the lines Python's tools read, the same on both sides of the trust boundary.

The runner seeds linecache with these lines (runner._seed_linecache): what ``inspect``, and Triton through it, read
as a kernel's source.  The judge's language check (judge/language.py, "kernel sources") takes the same lines and
finds, for every @triton.jit function, the text Triton will compile from them, so that it can refuse a module where
that text is not the function it checked.  One function, so that both sides split the bytes alike: tokenize's
encoding rules (a coding cookie, a BOM, else UTF-8), universal newlines (\\r\\n and \\r end a line, as for the
parser), each line with its ending.
"""

import io
import tokenize


def lines(data):
    """``data`` (bytes, or str already decoded) as a list of lines with their endings, read as linecache reads a
    file; None where the bytes cannot be decoded so (compile() then says what is wrong with them)."""
    if isinstance(data, str):
        return io.StringIO(data, newline=None).readlines()
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return io.TextIOWrapper(io.BytesIO(data), encoding, line_buffering=True).readlines()
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None

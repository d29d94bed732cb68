"""Does a new shared device block show what this process (or another) freed before?  (threat-model.md, "the slack
of a shared block").

    python3 bench/slack_probe.py [--mib N]

On a GPU: for each way device memory can come back to the driver and out again, fills N MiB (default 256) with a
pattern, frees it, makes a block with `cudashare.Block.create` (as the judge makes every block it shares) and
counts the pattern's bytes in it, twice.  Prints one JSON object: for each case, the bytes of the pattern found.
Any is a leak (exit 1): a block's slack beyond its tensors, and all of an answer's spare block, are the runner's
to read.  On an H200 with driver 580.159 none was found (docs/threat-model.md): the driver hands out cleared
memory, so kgym does not clear blocks itself; run this again on another driver.

Cases: `torch_freed` (a torch tensor, then torch.cuda.empty_cache(): the judge calls it between variants and
before it is kept), `block_freed` (an earlier block closed: a previous command's inputs or answer), `other_process`
(a process that filled memory and exited: the GPU's previous tenant).
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "harness"))


def count(block, value):
    import torch

    return int((block.bytes() == value).sum().item())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--child-fill", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    import torch

    n = a.mib << 20
    if a.child_fill is not None:  # the other process: fill, synchronize, exit
        x = torch.full((n,), a.child_fill, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        del x
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no GPU"}))
        return 2
    from kgym_harness.shared import cudashare

    out = {"mib": a.mib}

    def case(name, value, free):
        row = {"found": [], "of": n}
        for _ in range(2):
            free()
            b = cudashare.Block.create(n)
            row["found"].append(count(b, value))
            b.close()
        out[name] = row

    def torch_freed(value=0x5A):
        x = torch.full((n,), value, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        del x
        torch.cuda.empty_cache()

    def block_freed(value=0x3C):
        b = cudashare.Block.create(n)
        b.bytes().fill_(value)
        torch.cuda.synchronize()
        b.close()

    def other_process(value=0x77):
        torch.cuda.empty_cache()
        subprocess.run([sys.executable, os.path.abspath(__file__), "--mib", str(a.mib), "--child-fill", str(value)],
                       check=True)

    torch.zeros(1, device="cuda")  # the context first: its own allocations are not the probe's
    case("torch_freed", 0x5A, torch_freed)
    case("block_freed", 0x3C, block_freed)
    case("other_process", 0x77, other_process)
    print(json.dumps(out))
    bad = [k for k, v in out.items() if isinstance(v, dict) and any(v["found"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

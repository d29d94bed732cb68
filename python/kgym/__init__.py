"""kgym — Python side of the kgym kernel gym.

`kgym.rl` binds the C RL library (rewards, GRPO/RLOO/TRLOO advantages, PRS/MRS
rejection sampling, curriculum, metrics) through ctypes over build/libkgym.so
(or $KGYM_LIB); nothing is compiled at install time.  See docs/rl.md.
"""

from . import rl

__all__ = ["rl"]

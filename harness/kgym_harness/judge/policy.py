"""kgym's reward-hack policy: which finding types make a verdict ``hacked`` (policy/default.json, passed down by
kgym in the job as ``policy``), and the runtime layer's settings.

The static layer is the candidate language (language.py, policy/language.json, docs/candidate-language.md); this
module only reads the policy document around it.  The verdict is kgym's (C): the policy's ``findings`` map says
which types are hacks, which are only warnings, and which are not checked.
"""

import json
import os


def default_policy_path():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                        "policy", "default.json")


def load_default():
    """The repository's default policy; {} when it is missing (then every finding type counts as a hack)."""
    try:
        with open(default_policy_path(), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def severity(policy, kind):
    """hack | warn | off: unknown finding types are hacks (fail closed)."""
    return (policy.get("findings") or {}).get(kind, "hack")

"""The verdict engine: compare an outcome with the canonical reference and explain any
difference by the policy space of extended_policies.py.

    from poolgrad.verdicts import classify
    v = classify(spec, x, grad_output, outcome)      # -> Verdict; v.to_dict() is JSON-ready
"""

from .classify import classify
from .extended_policies import Policy
from .verdict import VERDICTS, Verdict

__all__ = ["classify", "Verdict", "VERDICTS", "Policy"]

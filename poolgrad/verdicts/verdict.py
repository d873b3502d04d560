"""The Verdict record: what classify() concluded about one (case, target) outcome."""

from __future__ import annotations

import dataclasses
import numpy as np

from poolgrad.json_values import encode_array, float_to_json

VERDICTS = ("conforms", "reordered", "policy", "inconsistent", "inconsistent_indices", "inconsistent_modes", "wrong", "unsupported", "error", "crash",
            "timeout", "nondeterministic", "not_installed", "no_device", "not_run")


def json_value(v):
    """Arrays to nested lists, with NaN and +-inf (and -0.0) as the case-file strings."""
    if v is None or type(v) in (int, str, bool):  # most of a verdict's values (its cells' indices)
        return v
    if isinstance(v, np.ndarray):
        return encode_array(v)
    if isinstance(v, (list, tuple)):
        return [json_value(i) for i in v]
    if isinstance(v, dict):
        return {k: json_value(i) for k, i in v.items()}
    if isinstance(v, (float, np.floating)):
        return float_to_json(float(v))
    if isinstance(v, np.integer):
        return int(v)
    return v


@dataclasses.dataclass
class Verdict:
    verdict: str
    message: str = ""
    policy: dict | None = None            # backward policy that explains the gradient
    forward_policy: dict | None = None    # policy that explains the forward output
    valid_subgradient: bool | None = None  # max-type only
    max_abs_error: float | None = None
    max_ulp_error: float | None = None
    differing_in: str | None = None       # "forward" or "grad_input": where differing_cells are
    differing_cells: list = dataclasses.field(default_factory=list)
    differing_count: int = 0

    def to_dict(self) -> dict:
        return {f.name: json_value(getattr(self, f.name)) for f in dataclasses.fields(self)}

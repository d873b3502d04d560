"""One case as the verdict engine sees it: canonical results computed once, policy results
computed on demand and kept, shared by every target's outcome of the same case."""

from __future__ import annotations

import collections

import numpy as np

from poolgrad import reference

from .extended_policies import Policy, Result, candidates, features

CACHE_SIZE = 128
_cache: collections.OrderedDict = collections.OrderedDict()


class Case:
    def __init__(self, spec, x: np.ndarray, grad_output: np.ndarray):
        self.spec, self.x, self.grad_output = spec, x, grad_output
        self.expected_forward = reference.forward(spec, x)
        self.expected_grad_input = reference.backward(spec, x, grad_output)
        self.verdicts: dict = {}  # outcome fingerprint -> Verdict fields (identical outcomes recur)
        self._results: dict[Policy, Result] = {}
        self._candidates: list[Policy] | None = None
        self._magnitude = None
        self._derived: dict = {}

    def result(self, policy: Policy) -> Result:
        if policy not in self._results:
            self._results[policy] = policy.evaluate(self.spec, self.x, self.grad_output)
        return self._results[policy]

    def candidates(self) -> list[Policy]:
        if self._candidates is None:
            self._candidates = candidates(features(self.spec, self.x, self.grad_output))
        return self._candidates

    def derived(self, key, compute):
        """``compute()``, once per case and ``key``: what every target's verdict in an AD mode
        needs (the direction, the reference's derivative, a policy's JVP). Shared: read only."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    def magnitude(self) -> tuple[np.ndarray, np.ndarray]:
        """Forward and gradient of |x| and |grad_output|: the size of the terms each output
        sums, so a tolerance is not fooled by cancellation."""
        if self._magnitude is None:
            ax, ag = np.abs(self.x), np.abs(np.asarray(self.grad_output))
            self._magnitude = (reference.forward(self.spec, ax), reference.backward(self.spec, ax, ag))
        return self._magnitude


def case_for(spec, x, grad_output, key=None) -> Case:
    """The cached Case for these inputs. Without ``key`` the objects' identities are the key
    (and the cache holds them, so an id cannot be reused while its entry lives)."""
    k = key if key is not None else (id(spec), id(x), id(grad_output))
    case = _cache.get(k)
    if case is None or (key is None and not (case.spec is spec and case.x is x
                                             and case.grad_output is grad_output)):
        case = Case(spec, x, grad_output)
        _cache[k] = case
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(k)
    return case

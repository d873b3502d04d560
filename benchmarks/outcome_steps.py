"""How far the outcomes of one check travel (issue 39): from ``suite.check.check`` to the record,
every call of a poolgrad function one of whose parameters (not a method's own ``self``) holds
an outcome, the outcomes list or one of an outcome's arrays: by identity, inside a list, tuple
or dict, among a poolgrad object's attributes one level down, or in a function's closure or
bound object. A method that reads its own object's state is no step; an array derived from an
outcome's (a mask, a float64 copy) is no longer the outcome's.

    python benchmarks/outcome_steps.py [--verbose]

Four checks (a max-pool tie routed to the last maximum, explained by a finding and contradicted
by one; the canonical result with a finding in scope; an average off by an ulp); printed per
check and over all four: steps (distinct functions), calls, modules, entries into
verdicts/compare.py (distinct caller -> compare function pairs, the caller outside compare.py)
and the local names the outcome's objects are bound to.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

import numpy as np

import poolgrad
from poolgrad.adapters.base import ARRAY_FIELDS, OK, Outcome, Target
from poolgrad.cases import make_case
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.schema import parse_finding
from poolgrad.reference import PoolSpec
from poolgrad.suite.check import check
from poolgrad.verdicts import Policy

ROOT = os.path.dirname(poolgrad.__file__)
TARGET = Target("tensorflow", "eager", "cpu")
COMPARE = os.path.join("verdicts", "compare.py")
MAX = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 2, "stride": 2, "dtype": "float32"})
AVG = PoolSpec.from_dict({"op": "avg_pool1d", "kernel_size": 2, "stride": 2, "dtype": "float32"})
TIES = np.array([[[1.0, 1.0, 2.0, 2.0, 0.0, 3.0]]])
TIE_LAST = {"id": "tie-last", "when": ["ties"], "policy": {"tie": "last"}}
TIE_FIRST = {"id": "tie-first", "when": ["ties"], "policy": {"tie": "first"}}


def knowledge(*entries) -> Knowledge:
    base = {"framework": TARGET.framework, "behaviour": "what it does", "source": "kernel.cc: f",
            "link": "no upstream report"}
    return Knowledge(parse_finding({"title": e["id"], **base, **e}, i) for i, e in enumerate(entries))


def under(case, **policy) -> Outcome:
    r = Policy(**policy).evaluate(case.spec, case.input, case.grad_output)
    return Outcome(OK, forward=r.forward, grad_input=r.grad_input)


def scenarios():
    c = make_case("count-max", "user", MAX, TIES)
    yield "max tie=last, explained", c, [under(c, tie="last")], knowledge(TIE_LAST)
    c = make_case("count-max2", "user", MAX, TIES)
    yield "max tie=last, finding contradicted", c, [under(c, tie="last")], knowledge(TIE_FIRST)
    c = make_case("count-max3", "user", MAX, TIES)
    yield "max canonical, finding in scope", c, [under(c)], knowledge(TIE_LAST)
    c = make_case("count-avg", "user", AVG, TIES * 0.1)
    o = under(c)
    o.forward = np.nextafter(o.forward, np.float32(9), dtype=np.float32)
    yield "avg off by an ulp", c, [o], knowledge()


def tracked(outcomes) -> set[int]:
    ids = {id(outcomes)}
    for o in outcomes:
        ids.add(id(o))
        ids.update(id(getattr(o, name)) for name in ARRAY_FIELDS if getattr(o, name) is not None)
    return ids


def _direct(v, ids) -> bool:
    if id(v) in ids:
        return True
    if isinstance(v, (list, tuple)):
        return any(id(i) in ids for i in v)
    return isinstance(v, dict) and any(id(i) in ids for i in v.values())


def _attributes_hold(v, ids) -> bool:
    d = getattr(v, "__dict__", None)
    return isinstance(d, dict) and type(v).__module__.startswith("poolgrad") and any(_direct(i, ids) for i in d.values())


def holds(v, ids) -> bool:
    """``v`` is the outcome's, holds it one level down, or is a function that carries it (a
    closure cell, a bound method's object)."""
    if _direct(v, ids):
        return True
    if callable(v):
        cells = [c.cell_contents for c in getattr(v, "__closure__", None) or () if c.cell_contents is not v]
        owner = getattr(v, "__self__", None)
        carried = cells + ([owner] if owner is not None else [])
        return any(_direct(c, ids) or _attributes_hold(c, ids) for c in carried)
    return _attributes_hold(v, ids)


def trace(case, outcomes, kb):
    ids, calls, names, entries = tracked(outcomes), collections.Counter(), set(), set()

    def profile(frame, event, _arg):
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(ROOT):
            return
        params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        hit = [k for k in params if k != "self" and holds(frame.f_locals.get(k), ids)]
        if not hit:
            return
        where = (os.path.relpath(code.co_filename, ROOT), code.co_name)
        calls[where] += 1
        names.update(hit)
        caller = frame.f_back.f_code
        if where[0] == COMPARE and not caller.co_filename.endswith(COMPARE):
            entries.add((os.path.relpath(caller.co_filename, ROOT), caller.co_name, where[1]))
    sys.setprofile(profile)
    try:
        checked = check(case, TARGET, "2.21.0", outcomes, kb, 0.0)
    finally:
        sys.setprofile(None)
    return checked, calls, names, entries


def report(label, calls, names, entries, verbose=False):
    print(f"{label}: steps {len(calls)}, calls {sum(calls.values())}, modules {len({m for m, _ in calls})}, "
          f"compare.py entries {len(entries)}, names {len(names)}")
    if verbose:
        for (module, function), n in sorted(calls.items()):
            print(f"   {module}:{function} x{n}")
        for e in sorted(entries):
            print("   enters compare.py:", e)
        print("   names:", sorted(names))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--verbose", action="store_true", help="list the functions, entries and names over all checks")
    args = p.parse_args(argv)
    calls, names, entries = collections.Counter(), set(), set()
    for label, case, outcomes, kb in scenarios():
        checked, c, n, e = trace(case, outcomes, kb)
        report(f"{label} -> {checked.outcome}", c, n, e)
        calls.update(c)
        names |= n
        entries |= e
    report("all four", calls, names, entries, verbose=args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())

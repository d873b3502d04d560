"""Drafts of upstream reports, ready for a person to check and file: poolgrad files nothing.

    python -m poolgrad.upstream FINDING_ID            # print the draft (Markdown)
    python -m poolgrad.upstream FINDING_ID --run      # with the reproducer's output on this machine
    python -m poolgrad.upstream --write DIR           # one file per finding with no report upstream
    python -m poolgrad.upstream --write DIR --framework NAME
    python -m poolgrad.upstream FINDING_ID --write DIR

A draft speaks the framework's language, not poolgrad's: what the call returns on a small
input, what users expect (what the other frameworks return there), why (the kernel source), and
a reproducer a maintainer runs as it is. It follows the framework's issue form
(``<planner package>/upstream.md.j2``, extending ``reports/templates/upstream_base.md.j2``) and
fits in :data:`MAX_DRAFT_LINES`. A finding that has an upstream ``report`` gets no draft.

The reproducer (``<planner package>/upstream.py.j2``, extending
``reports/templates/upstream_base.py.j2``) is at most :data:`MAX_SCRIPT_LINES` lines of NumPy
and the framework: the finding's example shrunk to the smallest box of one (n, c) plane that
still shows the behaviour (cases.shrink.shrinks; repeated over the batch where the kernel is chosen
by the call's size; those whose reproducer fits first; where the framework is installed, the
first whose reproducer exits 1 here, up to VERIFIED tries, else the example's own), the call
written as the framework's users write it (from its planner's arguments), the expected values as
literals computed here by poolgrad's NumPy reference (never by the framework under test), and a
comparison that prints both and exits 1 while the behaviour holds, 0 once it does not. Where the
behaviour is that the call raises or the process dies, that is the exit status 1: the script
prints what the call returns once it returns, and holds no expected values.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import importlib
import platform
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import jinja2
import ml_dtypes
import numpy as np

from poolgrad import reference
from poolgrad.adapters import registry
from poolgrad.adapters.base import Target, Unsupported
from poolgrad.cases.case_file import CaseFileError, load_case_file
from poolgrad.cases.examples import mode_of
from poolgrad.cases.shrink import VERIFIED, checked_sides, claimed, shows, shrinks
from poolgrad.knowledge import sources
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.finding import Finding, Reference
from poolgrad.knowledge.impacts import IMPACTS
from poolgrad.reference.properties import properties_of_cases
from poolgrad.reports import reproducer
from poolgrad.reports.finding_text import variants_of
from poolgrad.reports.literals import WIDTH, call_args, compact, dict_code, literal
from poolgrad.verdicts import tolerances
from poolgrad.verdicts.ad_modes import direction
from poolgrad.verdicts.compare import identical

TEMPLATE = "upstream.md.j2"
SCRIPT = "upstream.py.j2"
MAX_DRAFT_LINES = 90
MAX_SCRIPT_LINES = 30
VERIFY_TIMEOUT = 120  # seconds a reproducer is given when a draft checks its input
RAISES = ("error", "unsupported", "crash", "timeout")  # verdicts whose behaviour is that the call raises or dies
# What the call does, by a failure claim's verdict (an undefined call's reproducer compares its arrays)
CALL_FATES = {"crash": "the process dies or hangs in the call", "timeout": "the process dies or hangs in the call",
              "unsupported": "the call refuses the input", "undefined": "the call reads or writes memory it does "
              "not own: it hangs, dies or returns arrays that change from call to call"}
DRAFT_MODES = ("backward", "jvp")  # the derivatives the reproducer templates write

# poolgrad's own vocabulary, which a framework's maintainers do not share: policy keys with a
# value, the spec, policies, verdict and impact names. A draft holds none of it.
VOCABULARY = re.compile(
    r"\b(?:tie|nan|nan_tie|ftz|order|signed_zero|init|accumulate|zero_sign|tie_within|passes)=|\bspec\b|\bspec's\b|SPEC\.md"
    r"|\bpolic(?:y|ies)\b|\binconsistent\w*|\bconform\w*|\bbehaviour_changed\b|\b(?:%s)\b"
    % "|".join(i for i in IMPACTS if "_" in i),  # the others ("error", "crash") are plain words
    re.IGNORECASE)

_ENV = jinja2.Environment(
    loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(Path(reproducer.__file__).parent / "templates"),
                                jinja2.FunctionLoader(reproducer._package_template)]),
    autoescape=False, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    keep_trailing_newline=True)


class NoDraft(ValueError):
    """The finding gets no draft (no example, no call for its example)."""


class Reported(NoDraft):
    """The finding has an upstream report: it gets no draft, its report is the one to follow."""


_ENV.filters["args"] = call_args
_ENV.filters["compact"] = lambda v: repr(compact(v))


def example_case(f: Finding):
    """The example file's first case in the finding's scope (by op, dtype and case properties)."""
    if f.example is None:
        raise NoDraft(f"finding {f.id!r} has no example case file (field 'example' in its findings file): add one")
    try:
        cases = load_case_file(f.example)
    except CaseFileError as e:
        raise NoDraft(f"finding {f.id!r}: its example does not load: {e}") from None
    for case, props in zip(cases, [p for c in cases for p in properties_of_cases(c.spec, [c.input])]):
        if f.in_scope(f"{case.spec.op}{case.input.ndim - 2}d", case.spec.dtype, props):
            return case
    return cases[0]


def target_of(f: Finding, case) -> Target:
    """The finding's first variant (and device, CPU first) that has a call for the case."""
    devices = [d for d in registry.DEVICES if any(fnmatch.fnmatchcase(d, p) for p in f.devices)]
    for variant in variants_of(f):
        for device in devices:
            target = Target(f.framework, variant, device)
            if not isinstance(registry.plan(target, case.spec, case.input.shape), Unsupported):
                return target
    raise NoDraft(f"finding {f.id!r}: no variant of {', '.join(f.variants)} has a call for its example case {case.id!r}")


def environment_switches(f: Finding) -> dict:
    """What the process needs for the finding to be in scope: the switches that keep the
    framework's kernels off the features its ``kernel_features`` excludes (its Dispatch)."""
    excluded = {r[1:] for r in f.kernel_features if r.startswith("!")}
    return registry.declared(f.framework).dispatch.switches_excluding(excluded) if excluded else {}


# -- the reproducer ---------------------------------------------------------------------------
def _template(f: Finding, target: Target, name: str):
    """The variant's planner's template ``name`` (an API's over a backend), else the framework's, else
    the base's."""
    fw = registry.get(f.framework)
    planner = fw.worker(target.variant).planner or fw.planner or ""
    base = name.replace("upstream.", "upstream_base.")
    return _ENV.select_template([f"{p}/{name}" for p in dict.fromkeys((planner, fw.planner)) if p] + [base]), planner


def script(f: Finding, case, target: Target, x, g, mode: str) -> str:
    """The standalone reproducer of ``f`` on (x, g)."""
    spec = case.spec
    if mode not in DRAFT_MODES:
        raise NoDraft(f"finding {f.id!r}: its reproducer would check {mode}, which the templates do not write")
    call = registry.plan(target, spec, x.shape)
    template, planner = _template(f, target, SCRIPT)
    if template.name == "upstream_base.py.j2":
        raise NoDraft(f"finding {f.id!r}: {planner or f.framework} has no reproducer template {SCRIPT}")
    want = checked_sides(f, spec, x, g, mode)
    geom = None if spec.is_roi else reference.resolve(spec, x.shape)  # a RoI call names its boxes
    rtol = atol = 0.0
    if not spec.is_max:  # sums are compared within poolgrad's bound: a few ulps of the dtype
        entry, info = tolerances.table()[spec.op][spec.dtype], ml_dtypes.finfo(spec.dtype)
        rtol, atol = entry["rtol_eps"] * float(info.eps), entry["atol_tiny"] * float(info.smallest_normal)
    raises = f.verdict in RAISES  # the exception (the dead child) is what the script shows: no expected values
    values = np.concatenate([np.ravel(x).astype(np.float64), np.ravel(g).astype(np.float64),
                             *[np.ravel(v).astype(np.float64) for v in want.values() if not raises]])
    fw = registry.get(f.framework)
    text = template.render(
        f=f, spec=spec, call=call, variant=target.variant, device=target.device, mode=mode, dtype=spec.dtype,
        rank=x.ndim - 2, shape=x.shape, geom=geom, planner=importlib.import_module(planner), framework=f.framework,
        backend_template=f"{fw.planner}/{SCRIPT}", environment=environment_switches(f),
        x=literal(x, 4), g=literal(g, 4), t=literal(direction(spec, x), 4) if mode == "jvp" else None,
        expected=dict_code({k: literal(v, 8) for k, v in want.items()}), rtol=rtol, atol=atol,
        divisor=_divisor(spec, geom), special=bool((~np.isfinite(values)).any()),
        crash=f.verdict in ("crash", "timeout"), raises=raises)
    return re.sub(r"\n{3,}", "\n\n", text)


def _divisor(spec, geom):
    """What a user divides a window sum by (avg) or scales it with (lp: K / count for a window
    clipped by ceil_mode, where a framework rescales so), as the framework templates that sum windows need it: a
    number where every window has the same, else a nested list."""
    if spec.is_max or spec.is_adaptive or spec.is_roi:
        return None
    if spec.op == "lp_pool":
        value = np.prod(geom.kernel_size) / geom.window_counts("in_padded")
    elif spec.divisor_override is not None:
        value = np.full(geom.out_shape, float(spec.divisor_override))
    else:
        value = geom.window_counts("in_padded" if spec.count_include_pad else "in_input").astype(np.float64)
    value = np.asarray(value, dtype=np.float64)
    return float(value.flat[0]) if value.size and np.all(value == value.flat[0]) else literal(value)


# -- the words around it ----------------------------------------------------------------------
def environment(framework: str, device: str) -> dict:
    fw = registry.get(framework)
    distribution = next((d for d in fw.distributions if _version(d)), fw.distributions[0])
    return {"version": _version(distribution) or "not installed", "distribution": distribution, "device": device,
            "cpu": _cpu(), "python": platform.python_version(), "numpy": np.__version__,
            "os": platform.platform(terse=True), "api": None}


@functools.cache
def _installed(framework: str) -> str | None:
    return registry.installed_version(framework)


def _version(distribution: str) -> str | None:
    import importlib.metadata
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def plain(text: str) -> str:
    """``text`` less its sentences in poolgrad's vocabulary (they compare with poolgrad's spec,
    which the draft shows by values instead), wrapped to WIDTH."""
    kept = " ".join(s for s in _sentences(text) if not VOCABULARY.search(s))
    return textwrap.fill(kept, WIDTH, break_long_words=False, break_on_hyphens=False)


def _sentences(text: str) -> list[str]:
    return re.split(r"(?<=[.;:])\s+(?=[A-Z(`])", " ".join(text.split()))


def api_name(framework: str, spec, rank: int, call, variant: str) -> str | None:
    """How ``framework``'s users call the op (its template's ``api`` block on ``variant``'s call)."""
    planner = registry.get(framework).planner
    template = _ENV.get_template(f"{planner}/{SCRIPT}")
    context = template.new_context({"spec": spec, "rank": rank, "call": call, "variant": variant,
                                    "planner": importlib.import_module(planner)})
    return "".join(template.blocks["api"](context)).strip() or None


def others(knowledge: Knowledge, f: Finding, spec, x, g, mode: str) -> list[str]:
    """The frameworks that return the expected values on this input (CPU, their usual call), by
    poolgrad's knowledge base: a call there and no finding of theirs in scope. At most five."""
    props = properties_of_cases(spec, [x])[0]
    lines = []
    for name, fw in registry.FRAMEWORKS.items():
        if name == f.framework or not fw.planner:
            continue
        usual = fw.variants[0]  # a framework's first variant is its usual call
        call = registry.plan(Target(name, usual, "cpu"), spec, x.shape)
        if isinstance(call, Unsupported) or any(
                h.framework == name and usual in variants_of(h) and mode in h.modes
                and any(fnmatch.fnmatchcase("cpu", d) for d in h.devices) and shows(h, spec, x, g, mode, props)
                for h in knowledge):
            continue
        api = api_name(name, spec, x.ndim - 2, call, usual)
        version = _installed(name)
        lines.append(f"{name}{' ' + version if version else ''}" + (f" (`{api}`)" if api else ""))
    return lines[:5]


def expectation(spec, dtype: str) -> str:
    """What users of pooling expect of the op, in plain words."""
    if spec.is_max:
        return ("each window's maximum (NaN where the window holds one), and the window's gradient "
                "sent to that element (to the first one where several are equal)")
    if spec.op == "roi_crop_max_pool":
        return ("each window's maximum over the crop's bilinear points (an infinity where the pixels a point "
                "reads give one), and the window's gradient sent to that point and on to its pixels by their weights")
    mean = "mean" if "avg" in spec.op else "p-norm"
    return (f"each window's {mean} computed without overflow and rounded once to {dtype}, and a gradient "
            f"that is the upstream gradient shared over the window the same way")


def returns(f: Finding, claim: dict | None, want: dict) -> str:
    """What the framework returns on the case, by the finding's claim."""
    if f.verdict == "error" and f.error:
        return f"the call raises {' or '.join(f'`{t}`' for t in f.error[0])}"
    if f.verdict in CALL_FATES:
        return CALL_FATES[f.verdict]
    differ = {side: got for side, got in (claim or {}).items() if side in want and not identical(got, want[side])}
    if differ:  # else the example shows the finding only with another one of the framework's
        return "; ".join(f"the {side} is `{literal(got).replace(chr(10), ' ')}` where `{literal(want[side]).replace(chr(10), ' ')}` "
                         f"is expected" for side, got in differ.items())
    return f"the {' and the '.join(want)} differ from what is expected"


def run_script(script: str, timeout: float = 600) -> dict:
    """The reproducer run alone with this interpreter in an empty directory: its exit status and
    the last lines it printed."""
    with tempfile.TemporaryDirectory() as empty:
        (Path(empty) / "repro.py").write_text(script)
        try:
            done = subprocess.run([sys.executable, "repro.py"], cwd=empty, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"status": f"no exit within {timeout:.0f} s", "text": ""}
    lines = (done.stdout + done.stderr).strip().splitlines()
    status = done.returncode if done.returncode >= 0 else f"killed by signal {-done.returncode}"
    return {"status": status, "text": "\n".join(lines[-12:])}


def report_of(f: Finding) -> Reference | None:
    return next((r for r in f.upstream if r.type == "report"), None)


def draft(knowledge: Knowledge, f: Finding, run: bool = False, verify: bool = False) -> str:
    """The Markdown draft of an upstream report of ``f``; ``run``: with the reproducer's output
    on this machine; ``verify``: on the smallest input whose reproducer shows the behaviour here
    (where the framework is installed)."""
    reported = report_of(f)
    if reported:
        raise Reported(f"finding {f.id!r} is reported upstream already: {reported.url}")
    case = example_case(f)
    target = target_of(f, case)
    mode = mode_of(f)
    # The inputs a draft tries, those whose reproducer fits in MAX_SCRIPT_LINES first (else in
    # the order shrinks() gives), the example's own last.
    *smaller, example = shrinks(f, case, target, mode)
    tried = [(xg, script(f, case, target, *xg, mode)) for xg in smaller]
    tried.sort(key=lambda t: len(t[1].splitlines()) > MAX_SCRIPT_LINES)
    inputs = [xg for xg, _ in tried[:VERIFIED - 1]] + [example]
    (x, g), code = inputs[0], tried[0][1] if tried else script(f, case, target, *example, mode)
    if verify and registry.installed(f.framework):
        # The reference cannot tell which inputs a kernel treats otherwise (a compiler folds a
        # single window, a call on two channels takes another path): run the reproducer on each
        # input until it shows the behaviour (exit 1), else keep the example's own.
        for x, g in inputs:
            code = script(f, case, target, x, g, mode)
            if run_script(code, VERIFY_TIMEOUT)["status"] == 1:
                break
    spec = case.spec
    want = checked_sides(f, spec, x, g, mode)
    template, planner = _template(f, target, TEMPLATE)
    fw = registry.get(f.framework)
    where = fw.worker(target.variant).upstream or fw.upstream
    env = environment(f.framework, target.device)
    api = planner.rsplit(".", 1)[-1]  # an API over the framework that plans the variant
    if planner != fw.planner and _version(api):
        env["api"] = f"{api} {_version(api)}"
    context = dict(
        f=f, title=f.title, script=code, env=env, repo=where.repository if where else f.framework,
        form=where.form if where else "", device=target.device.upper(), shape=tuple(x.shape), dtype=spec.dtype,
        source=plain(f.source), expectation=expectation(spec, spec.dtype),
        returns=returns(f, claimed(f, spec, x, g, mode), want), others=others(knowledge, f, spec, x, g, mode),
        output=run_script(code) if run else None)
    sentences = _sentences(f.behaviour)
    while True:  # the explanation's last sentences go where the draft would be too long
        text = re.sub(r"\n{3,}", "\n\n", template.render(behaviour=plain(" ".join(sentences)), **context))
        text = text.rstrip("\n") + "\n"
        if len(text.splitlines()) <= MAX_DRAFT_LINES or len(sentences) <= 1:
            return text
        sentences.pop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m poolgrad.upstream", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ids", nargs="*", metavar="FINDING_ID", help="the findings to draft (with --write and none: every finding without a report)")
    p.add_argument("--write", metavar="DIR", help="write DIR/<finding-id>.md instead of printing")
    p.add_argument("--run", action="store_true", help="run each reproducer here and put its output in the draft")
    p.add_argument("--framework", action="append", default=[], metavar="NAME", help="with --write and no FINDING_ID: only this framework's findings (repeatable)")
    p.add_argument("--findings", action="append", default=[], metavar="PATH", help="a findings file of your own, added to the knowledge base (repeatable)")
    p.add_argument("--no-check", action="store_true", help="do not run the reproducer to pick its input (the smallest "
                   "that the reference says shows the behaviour; checked by running it where the framework is installed)")
    args = p.parse_args(argv)
    knowledge = sources.load(extra=args.findings)
    by_id = {f.id: f for f in knowledge}
    unknown = [i for i in args.ids if i not in by_id]
    if unknown:
        p.error(f"unknown finding {unknown[0]!r}; see docs/frameworks/<framework>.md for the ids")
    if not args.ids and not args.write:
        p.error("name a FINDING_ID, or give --write DIR to draft every finding without a report")
    chosen = [by_id[i] for i in args.ids] or [f for f in knowledge if not report_of(f)
                                              and (not args.framework or f.framework in args.framework)]
    failed = 0
    for f in chosen:
        try:
            text = draft(knowledge, f, run=args.run, verify=not args.no_check)
        except Reported as e:
            print(f"no draft: {e}", file=sys.stderr)
            continue
        except NoDraft as e:
            print(f"no draft: {e}", file=sys.stderr)
            failed += 1
            continue
        if args.write:
            path = Path(args.write) / f"{f.id}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(path)
        else:
            sys.stdout.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

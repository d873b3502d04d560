"""Drafts of upstream reports, ready for a person to check and file: poolgrad files nothing.

    python -m poolgrad.upstream FINDING_ID            # print the draft (Markdown)
    python -m poolgrad.upstream FINDING_ID --run      # with the reproducer's output on this machine
    python -m poolgrad.upstream --write DIR           # one file per finding with no report upstream
    python -m poolgrad.upstream --write DIR --framework torch
    python -m poolgrad.upstream FINDING_ID --write DIR

A draft follows the form of its framework's issue template (``<planner package>/upstream.md.j2``,
extending ``reports/templates/upstream_base.md.j2``): a title, what the kernel does and why (the
finding's behaviour and kernel source), a minimal standalone reproducer as the first ``python``
block, what the spec and the other frameworks do, and the environment measured. The reproducer
is the report's per-result script (reports/reproducer.py) rendered for the finding's example
case on its first variant and device: it imports only NumPy and the framework, computes the
spec's result with plain NumPy, prints it beside the framework's and exits 1 while the behaviour
holds, 0 once it does not.
"""

from __future__ import annotations

import argparse
import fnmatch
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import jinja2
import numpy as np

from poolgrad.adapters import registry
from poolgrad.adapters.base import Target, Unsupported
from poolgrad.cases import findings as kb
from poolgrad.cases import semantics
from poolgrad.cases.case_file import CaseFileError, load_case_file
from poolgrad.cases.examples import mode_of
from poolgrad.reference.properties import properties_of_cases
from poolgrad.reports import reproducer
from poolgrad.reports.records import encode_array

TEMPLATE = "upstream.md.j2"

_ENV = jinja2.Environment(
    loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(Path(reproducer.__file__).parent / "templates"),
                                jinja2.FunctionLoader(reproducer._package_template)]),
    autoescape=False, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    keep_trailing_newline=True)


class NoDraft(ValueError):
    """The finding cannot be drafted (no example, no call for its example on its paths)."""


def example_case(f: kb.Finding):
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


def target_of(f: kb.Finding, case) -> Target:
    """The finding's first variant (and device, CPU first) that has a call for the case."""
    devices = [d for d in registry.DEVICES if any(fnmatch.fnmatchcase(d, p) for p in f.devices)]
    for variant in semantics.variants_of(f):
        for device in devices:
            target = Target(f.framework, variant, device)
            if not isinstance(registry.plan(target, case.spec, case.input.shape), Unsupported):
                return target
    raise NoDraft(f"finding {f.id!r}: no variant of {', '.join(f.variants)} has a call for its example case {case.id!r}")


def environment_switches(f: kb.Finding) -> dict:
    """What the process needs for the finding to be in scope: the switches that keep the
    framework's kernels off the features its ``kernel_features`` excludes (its Dispatch)."""
    excluded = {r[1:] for r in f.kernel_features if r.startswith("!")}
    return registry.declared(f.framework).dispatch.switches_excluding(excluded) if excluded else {}


def record(f: kb.Finding, case, target: Target) -> dict:
    """The example as a result record, for reports.reproducer.script."""
    return {"environment": environment_switches(f),"case_id": case.id, "target": target.id, "framework": target.framework, "variant": target.variant,
            "device": target.device, "framework_version": registry.installed_version(f.framework) or "(not installed)",
            "verdict": f.verdict, "spec": case.spec.to_dict(), "dtype": case.spec.dtype, "shape": list(case.input.shape),
            "input": encode_array(case.input), "grad_output": encode_array(case.grad_output), "mode": mode_of(f)}


def environment(framework: str, device: str) -> dict:
    fw = registry.get(framework)
    distribution = next((d for d in fw.distributions if _version(d)), fw.distributions[0])
    return {"version": _version(distribution) or "not installed", "distribution": distribution, "device": device,
            "cpu": _cpu(), "python": platform.python_version(), "numpy": np.__version__,
            "os": platform.platform(terse=True), "api": None}


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


def others(knowledge: kb.Knowledge, f: kb.Finding, case) -> list[str]:
    """What each other framework does on the case, by its findings in scope there."""
    props = properties_of_cases(case.spec, [case.input])[0]
    op = f"{case.spec.op}{case.input.ndim - 2}d"
    lines = []
    for name in registry.FRAMEWORKS:
        if name == f.framework:
            continue
        found = [g for g in knowledge if g.framework == name and g.in_scope(op, case.spec.dtype, props)
                 and set(g.modes) & set(f.modes)]
        if found:
            lines += [f"{name} {', '.join(semantics.variants_of(g))}: {g.title} ({g.claim_text()}; finding {g.id})"
                      for g in found]
        else:
            lines.append(f"{name}: no finding covers this case (its paths followed the spec on the suite's cases of this kind)")
    return lines


def spec_text(f: kb.Finding, case) -> str:
    rule = ("the maximum of the window's real elements (padding never takes part), the first NaN if "
            "there is one, else the first maximum in row-major window order (tie=first, nan=propagate); "
            "the window's upstream gradient goes to that element" if case.spec.is_max else
            "sums in float64 rounded once to the dtype; avg divides by its divisor, lp takes "
            "(sum x**p * K/taps inside the padded input) ** (1/p)")
    return (f"poolgrad's SPEC.md: {rule}. {f.framework} instead: {semantics.claim(f)}"
            + (f" (impact: {kb.IMPACTS[f.impact]})." if f.impact in kb.IMPACTS else "."))


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
    return {"status": status, "text": "\n".join(lines[-40:])}


def draft(knowledge: kb.Knowledge, f: kb.Finding, run: bool = False) -> str:
    """The Markdown draft of an upstream report of ``f``; ``run``: with the reproducer's output
    on this machine."""
    case = example_case(f)
    target = target_of(f, case)
    try:
        script = reproducer.script(record(f, case, target))
    except reproducer.NotReproducible as e:
        raise NoDraft(f"finding {f.id!r}: {e}") from None
    fw = registry.get(f.framework)
    planner = fw.worker(target.variant).planner or fw.planner or ""
    # The form of the package that plans the variant (Keras's for keras), else the framework's.
    template = _ENV.select_template([f"{p}/{TEMPLATE}" for p in dict.fromkeys((planner, fw.planner)) if p]
                                    + ["upstream_base.md.j2"])
    api = planner.rsplit(".", 1)[-1]
    # Where the variant's worker reports (a package that plans it for the framework: Keras's), else the framework's.
    where = fw.worker(target.variant).upstream or fw.upstream
    repo, form = (where.repository, where.form) if where else (f"{f.framework}'s repository", "")
    env = environment(f.framework, target.device)
    if api != f.framework and _version(api):
        env["api"] = f"{api} {_version(api)}"
    mode = mode_of(f)
    call_words = (f"the {target.variant} path ({api} planner) on {target.device.upper()}"
                  + ("" if mode == "backward" else f", its {mode.replace('_', ' ')}"))
    case_words = f"{case.spec.op}{case.input.ndim - 2}d, {case.spec.dtype}, input shape {tuple(case.input.shape)}"
    return template.render(f=f, title=f.title, script=script, env=env,
                           spec_text=spec_text(f, case), others=others(knowledge, f, case), repo=repo, form=form,
                           call_words=call_words, case_words=case_words, output=run_script(script) if run else None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m poolgrad.upstream", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ids", nargs="*", metavar="FINDING_ID", help="the findings to draft (with --write and none: every finding without a report)")
    p.add_argument("--write", metavar="DIR", help="write DIR/<finding-id>.md instead of printing")
    p.add_argument("--run", action="store_true", help="run each reproducer here and put its output in the draft")
    p.add_argument("--framework", action="append", default=[], metavar="NAME", help="with --write and no FINDING_ID: only this framework's findings (repeatable)")
    p.add_argument("--findings", action="append", default=[], metavar="PATH", help="a findings file of your own, added to the knowledge base (repeatable)")
    args = p.parse_args(argv)
    knowledge = kb.load(extra=args.findings)
    by_id = {f.id: f for f in knowledge}
    unknown = [i for i in args.ids if i not in by_id]
    if unknown:
        p.error(f"unknown finding {unknown[0]!r}; see docs/frameworks/<framework>.md for the ids")
    if not args.ids and not args.write:
        p.error("name a FINDING_ID, or give --write DIR to draft every finding without a report")
    chosen = [by_id[i] for i in args.ids] or [f for f in knowledge if not semantics.reported(f)
                                              and (not args.framework or f.framework in args.framework)]
    failed = 0
    for f in chosen:
        try:
            text = draft(knowledge, f, run=args.run)
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

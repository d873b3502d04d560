"""A release diff reports behaviour, not noise: results a nondeterministic finding covers are
compared by whether the finding holds and never make it exit 1, a real change still does, and a
finding the new release no longer shows reads "fixed upstream" with its fix, in the diff and in
the lanes' history (the first release without it). An auditor reads it by finding: changes are
grouped by the findings that explained them before and after, with their titles and impacts,
and every section is printed ("none" when empty), as text and as Markdown.

The runs are judged as a run judges them (suite.check) with a knowledge base of a framework no
installed findings file speaks of; the framework's arrays come from the reference under a
policy (never from a framework)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from poolgrad.adapters.base import OK, Outcome, Target
from poolgrad.cases import make_case
from poolgrad.knowledge import sources
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.history import fixed_in, version_range
from poolgrad.reference import PoolSpec
from poolgrad.reports import synthetic
from poolgrad.reports.__main__ import main
from poolgrad.reports.records import write_record
from poolgrad.suite.check import check
from poolgrad.suite.history import build, table
from poolgrad.verdicts import Policy

FIX = "https://example.org/otherfw/pull/7"
FINDINGS = f'''
[[finding]]
id = "otherfw-gpu-racing-adds"
title = "otherfw adds overlapping gradients with atomics on the GPU"
impact = "rounding"
framework = "otherfw"
devices = ["gpu"]
verdict = "nondeterministic"
behaviour = "the additions land in whatever order the threads reach memory"
source = "kernel.cu: scatter"
upstream = []

[[finding]]
id = "otherfw-cpu-last-nan"
title = "otherfw routes a window of several NaNs to the last"
impact = "nan_semantics"
framework = "otherfw"
when = ["nan_several"]
policy = {{nan_tie = "last"}}
behaviour = "the CPU kernel keeps the last NaN it reads"
source = "kernel.cc: max"
upstream = [{{type = "fix", url = "{FIX}", title = "keep the first NaN", state = "merged in 2.14.0"}}]

[[finding]]
id = "otherfw-cpu-nan-dropped"
title = "otherfw's CPU max skips NaN"
impact = "wrong_forward"
framework = "otherfw"
devices = ["cpu"]
when = ["nan"]
policy = {{nan = "ignore"}}
behaviour = "the CPU kernel compares with >, which a NaN never wins"
source = "kernel.cc: max"
upstream = []
'''
# The sections every diff prints; NOISE's title, which names it.
NOISE = "noise: nondeterministic by a finding, compared by whether it holds (not a change)"
SECTIONS = ("new divergences", "fixed", "fixed upstream", "behaviour changes", NOISE,
            "label only: same behaviour, other labels (not a change)")
SPEC = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 2, "stride": 1, "dtype": "float32"})
# A window of two NaNs (the CPU finding's trigger) and ties across overlapping windows.
VALUES = {"nans": [np.nan, np.nan, 1, 2], "ties": [3, 3, 3, 1]}


def _findings(tmp_path):
    path = tmp_path / "otherfw.toml"
    path.write_text(FINDINGS)
    return path


def _run(path, version, knowledge, policies, variants=("eager",)):
    """A release's results file: per (device, case id) the policy the framework follows on each
    of ``variants``."""
    with open(path, "w") as fh:
        for (device, cid), policy in policies.items():
            case = make_case(cid, "user", SPEC, np.array([[VALUES[cid]]], dtype=np.float32),
                             np.array([[[1, 2, 4]]], dtype=np.float32))
            r = Policy(**policy).evaluate(case.spec, case.input, case.grad_output)
            outcome = Outcome(OK, forward=r.forward, grad_input=r.grad_input, info={"call_shape": [1, 1, 4]})
            for variant in variants:
                rec = check(case, Target("otherfw", variant, device), version, [outcome], knowledge, 0.0).record
                write_record(fh, {**rec, "run_id": version})
        write_record(fh, synthetic.environment(version, versions={"otherfw": version}))
    return path


def _releases(tmp_path, new_policies, variants=("eager",)):
    """Release 2.13.0 (the CPU keeps the last NaN, the GPU race lands on the last tie) and
    2.14.0 with ``new_policies`` over it, on ``variants``."""
    knowledge = sources.load(_findings(tmp_path), history=None)
    old_policies = {("cpu", "nans"): {"nan_tie": "last"}, ("cpu", "ties"): {},
                    ("gpu", "nans"): {}, ("gpu", "ties"): {"tie": "last"}}
    old = _run(tmp_path / "old.jsonl", "2.13.0", knowledge, old_policies, variants)
    new = _run(tmp_path / "new.jsonl", "2.14.0", knowledge, {**old_policies, **new_policies}, variants)
    return knowledge, old, new


def _diff(tmp_path, old, new, capsys, *extra):
    code = main(["diff", str(old), str(new), "--findings", str(_findings(tmp_path)), *extra])
    return code, capsys.readouterr().out


def test_nondeterministic_results_are_listed_apart_and_do_not_exit_1(tmp_path, capsys):
    # The GPU race lands elsewhere in the new release: on the spec's order for the ties, on
    # the last NaN for the NaNs, which the NaN finding explains (the record names only it: the
    # race is found in the result's scope). Nothing else moved.
    _, old, new = _releases(tmp_path, {("gpu", "ties"): {}, ("gpu", "nans"): {"tie": "last", "nan_tie": "last"}})
    code, out = _diff(tmp_path, old, new, capsys)
    assert code == 0, out
    assert (f"{NOISE}: 2 results\n  2 results on otherfw-eager-gpu: otherfw-gpu-racing-adds still holds on 2, "
            "no longer holds on 0\n    otherfw-gpu-racing-adds, impact rounding: otherfw adds overlapping gradients "
            "with atomics on the GPU\n") in out
    assert "e.g. nans on otherfw-eager-gpu: otherfw-gpu-racing-adds still holds" in out
    assert all(f"\n{section}: none\n" in out for section in SECTIONS if section != NOISE), out
    assert out.rstrip().endswith("behaviour changed: no (exit 0) — nondeterministic results only")
    # The knowledge base decides: without the finding the same arrays are changes.
    plain = main(["diff", str(old), str(new), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert plain == 1 and not d["nondeterministic"]
    assert {(c["case_id"], c["target"]) for c in d["fixed"] + d["new_divergences"]} == {
        ("ties", "otherfw-eager-gpu"), ("nans", "otherfw-eager-gpu")}


def test_a_real_change_beside_the_noise_still_exits_1(tmp_path, capsys):
    _, old, new = _releases(tmp_path, {("gpu", "ties"): {}, ("cpu", "ties"): {"tie": "last"}})
    code, out = _diff(tmp_path, old, new, capsys, "--json")
    d = json.loads(out)
    assert code == 1 and d["behaviour_changed"]
    assert [(c["case_id"], c["target"]) for c in d["new_divergences"]] == [("ties", "otherfw-eager-cpu")]
    assert d["nondeterministic"] == [{"case_id": "ties", "target": "otherfw-eager-gpu",
                                      "findings": ["otherfw-gpu-racing-adds"], "holds": True}]
    assert d["fixed_upstream"] == []  # the NaN finding still holds


def test_a_finding_the_new_release_no_longer_shows_reads_fixed_upstream_with_its_fix(tmp_path, capsys):
    knowledge, old, new = _releases(tmp_path, {("cpu", "nans"): {}})      # 2.14.0 keeps the first NaN
    code, out = _diff(tmp_path, old, new, capsys)
    assert code == 1  # a fix is a behaviour change
    assert ("fixed: 1 result in 1 group\n  1 result on otherfw-eager-cpu: otherfw-cpu-last-nan, pass (known) -> "
            "conforms, pass\n    otherfw-cpu-last-nan, impact nan_semantics: otherfw routes a window of several NaNs "
            "to the last\n    e.g. nans on otherfw-eager-cpu: policy (nan=propagate, tie=last) -> "
            "conforms (nan=propagate, tie=first)\n") in out
    assert (f"fixed upstream: 1 finding\n  otherfw-cpu-last-nan: gone from the 1 result it explained on "
            f"otherfw-eager-cpu; fix {FIX} (merged in 2.14.0)\n    otherfw-cpu-last-nan, impact nan_semantics") in out
    # The HTML report's changes against the baseline say so too (fix from the record's finding).
    assert main(["build", str(new), "--baseline", str(old), "-o", str(tmp_path / "r.html")]) == 0
    assert ("<li>otherfw-cpu-last-nan (impact nan_semantics: otherfw routes a window of several NaNs to the last): "
            f"gone from the 1 result it explained on otherfw-eager-cpu; fix {FIX}") in (tmp_path / "r.html").read_text()
    # The lanes' history marks 2.14.0 as the first release without it, and the range ends there.
    history = build([old, new], knowledge, {"cpu": "test", "cpu_features": []})
    assert fixed_in(history, "otherfw-cpu-last-nan") == "2.14.0"
    assert version_range(history, "otherfw-cpu-last-nan") == "<2.14.0"
    assert fixed_in(history, "otherfw-gpu-racing-adds") == ""  # a race that lands on the spec is no fix
    line = next(x for x in table(history, knowledge).splitlines() if "otherfw-cpu-last-nan" in x)
    assert line.endswith(f"otherfw-cpu-last-nan  <2.14.0; fixed in 2.14.0 (fix {FIX} (merged in 2.14.0))")


def test_a_moved_explanation_is_one_group_naming_both_findings_with_titles_and_impacts(tmp_path, capsys):
    """2.14.0 skips NaN where 2.13.0 kept the last: on both variants the results' explanation moves
    from one finding to two (skipping NaN, a worse impact, and the last NaN, which skipping them
    does not contradict: the largest set that holds explains); one group says so, each finding
    once, and every other section says none."""
    _, old, new = _releases(tmp_path, {("cpu", "nans"): {"nan": "ignore"}}, variants=("eager", "jit"))
    code, out = _diff(tmp_path, old, new, capsys)
    assert code == 1
    assert out.splitlines()[1] == ("0 new divergences, 0 fixed, 2 behaviour changes; 0 of them failing now; "
                                   "worst impact now: wrong_forward (otherfw-cpu-nan-dropped)")
    assert ("\nbehaviour changes: 2 results in 1 group\n"
            "  2 results on otherfw-eager-cpu, otherfw-jit-cpu: otherfw-cpu-last-nan, pass (known) -> "
            "otherfw-cpu-last-nan + otherfw-cpu-nan-dropped, pass (known)\n"
            "    otherfw-cpu-last-nan, impact nan_semantics: otherfw routes a window of several NaNs to the last\n"
            "    otherfw-cpu-nan-dropped, impact wrong_forward: otherfw's CPU max skips NaN\n"
            "    e.g. nans on otherfw-eager-cpu: policy (nan=propagate, tie=last) -> policy (nan=ignore, tie=first)\n"
            "    e.g. nans on otherfw-jit-cpu: ") in out
    assert all(f"\n{section}: none\n" in out for section in SECTIONS if section != "behaviour changes"), out
    assert out.endswith("\nbehaviour changed: yes (exit 1)\n")


def test_the_markdown_form_prints_every_section_and_the_command_exits_as_its_help_says(tmp_path, capsys):
    """A new unexplained divergence on two variants, as a release note: the group, "none" for
    the others; ``python -m poolgrad.reports`` exits 1 on it and 0 on a run against itself."""
    _, old, new = _releases(tmp_path, {("cpu", "ties"): {"tie": "split"}}, variants=("eager", "jit"))

    def run(*args):
        return subprocess.run([sys.executable, "-m", "poolgrad.reports", "diff", *map(str, args),
                               "--findings", str(_findings(tmp_path))], capture_output=True, text=True)
    r = run(old, new, "--format", "markdown")  # the one subprocess: the status the shell sees
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith(f"## poolgrad release diff: `{old}` → `{new}`\n\n**Behaviour changed: yes (exit 1)**: "
                               "2 new divergences, 0 fixed, 0 behaviour changes; 2 of them failing now\n")
    assert ("\n### New divergences: 2 results in 1 group\n\n"
            "- 2 results on `otherfw-eager-cpu`, `otherfw-jit-cpu`: conforms, pass → unexplained, FAIL\n"
            "  - e.g. `ties` on `otherfw-eager-cpu`: conforms (nan=propagate, tie=first) → policy (") in r.stdout
    others = [s for s in SECTIONS if s != "new divergences"]
    assert all(f"\n### {s[0].upper()}{s[1:]}: none\n" in r.stdout for s in others), r.stdout
    code, out = _diff(tmp_path, new, new, capsys, "--markdown")
    assert code == 0 and "**Behaviour changed: no (exit 0)**" in out
    assert _diff(tmp_path, old, tmp_path / "missing.jsonl", capsys)[0] == 2
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ("Exit status of diff: 0 when no behaviour changed" in help_text
            and "1 when a result is a new divergence, fixed, or a divergence whose arrays or failure moved" in help_text)


def test_a_race_the_new_results_no_longer_explain_is_listed_so_and_still_not_a_change(tmp_path, capsys):
    knowledge, old, _ = _releases(tmp_path, {})
    without = Knowledge([f for f in knowledge if f.id != "otherfw-gpu-racing-adds"])  # e.g. its range ended
    new = _run(tmp_path / "new.jsonl", "2.14.0", without, {("gpu", "ties"): {"tie": "all"}, ("gpu", "nans"): {}})
    code, out = _diff(tmp_path, old, new, capsys)
    assert code == 0, out
    assert (f"{NOISE}: 1 result\n  1 result on otherfw-eager-gpu: otherfw-gpu-racing-adds still holds on 0, "
            "no longer holds on 1\n") in out
    assert "e.g. ties on otherfw-eager-gpu: otherfw-gpu-racing-adds no longer holds" in out


def test_an_older_release_without_the_behaviour_is_no_fix(tmp_path, capsys):
    """The behaviour came with 2.14.0: the diff read with 2.14.0 as baseline and 2.13.0 as the
    run to audit shows 2.13.0 without it, which predates it, and says nothing was fixed."""
    knowledge = sources.load(_findings(tmp_path), history=None)
    older = _run(tmp_path / "2.13.jsonl", "2.13.0", knowledge, {("cpu", "nans"): {}})
    newer = _run(tmp_path / "2.14.jsonl", "2.14.0", knowledge, {("cpu", "nans"): {"nan_tie": "last"}})
    code, out = _diff(tmp_path, older, newer, capsys)
    assert code == 1 and ("new divergences: 1 result in 1 group\n  1 result on otherfw-eager-cpu: conforms, pass -> "
                          "otherfw-cpu-last-nan, pass (known)\n") in out
    code, out = _diff(tmp_path, newer, older, capsys)
    assert code == 1 and "fixed: 1 result in 1 group\n  1 result on otherfw-eager-cpu" in out
    assert "\nfixed upstream: none\n" in out


@pytest.mark.parametrize("per_release, fixed", [
    ({"2.11.0": [4, 0], "2.13.0": [0, 2], "2.14.0": [0, 2]}, "2.13.0"),   # the first release without it
    ({"2.11.0": [0, 3], "2.13.0": [4, 0]}, ""),                          # still holds in the newest
    ({"2.11.0": [4, 0], "2.13.0": [1, 1], "2.14.0": [0, 0]}, ""),        # partly, then not seen: not gone
    ({"2.11.0": [0, 3]}, ""),                                             # never held
])
def test_fixed_in_is_the_first_release_measured_without_it_after_the_newest_with_it(per_release, fixed):
    lanes = [{"lane": f"otherfw-{v}", "framework": "otherfw", "version": v} for v in per_release]
    history = {"format": "poolgrad-history/1", "lanes": lanes,
               "findings": {"f": {f"otherfw-{v}": c for v, c in per_release.items()}}}
    assert fixed_in(history, "f") == fixed

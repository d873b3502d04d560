"""python -m poolgrad.upstream: a draft a maintainer files as it is. Every draft of the knowledge
base, none excepted, is at most 90 lines, holds none of poolgrad's vocabulary, and its first
python block is a reproducer of at most 30 lines that imports NumPy and the framework only (as
drafted without running it, ``--no-check``; with ``-m slow``, as drafted here on the input its
run shows the behaviour on). The reproducers run: three (torch, JAX, PaddlePaddle) alone in an
empty directory; a sample of each installed framework's in one process per framework
(repro_runs.py: runpy, a fresh namespace each, poolgrad not importable); every one of them alone,
as the command drafts it here (its input checked by running it), with ``-m slow``. They exit 1 while the behaviour holds, and 0 on an input the
framework handles as users expect."""

from __future__ import annotations

import ast
import fnmatch
import functools
import itertools
import re
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import repro_runs

from poolgrad import upstream
from poolgrad.adapters import registry
from poolgrad.cases.examples import mode_of
from poolgrad.knowledge import sources
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.scope import version_in
from poolgrad.reports import finding_text, literals

KB = sources.load()
BY_ID = {f.id: f for f in KB}
# The unreported CPU findings of "done means" in issue 37, whose drafts run alone here.
ALONE = ["torch-max-last-nan-wins", "jax-max-neginf-window-padding-wins", "paddle-cpu-max-nan-fold"]
SAMPLE = 3  # drafts per framework run in CI; -m slow runs them all
# Reproducers that import an API over the framework (Keras, torchvision) or re-run themselves (a crash).
ALSO_IMPORTED = {"keras", "torchvision", "os", "sys", "subprocess"}


@functools.cache
def draft(fid: str) -> str:
    """A finding's draft, rendered once (~8 s for all of them: a test that needs a few renders those)."""
    return upstream.draft(KB, BY_ID[fid])


def drafts() -> dict[str, str]:
    return {f.id: draft(f.id) for f in KB if not upstream.report_of(f) and mode_of(f) in upstream.DRAFT_MODES}


def test_a_finding_only_about_double_backward_has_no_draft_and_says_why():
    undrafted = [f for f in KB if not upstream.report_of(f) and mode_of(f) not in upstream.DRAFT_MODES]
    assert undrafted  # torch.compile's and PaddlePaddle's missing second-order rules
    for f in undrafted:
        with pytest.raises(upstream.NoDraft, match=f"{f.id}.*would check {mode_of(f)}, which the templates do not write"):
            upstream.draft(KB, f)


def first_python_block(markdown: str) -> str:
    return re.search(r"^```python\n(.*?)^```$", markdown, re.S | re.M)[1]


def imports(script: str) -> set[str]:
    tree = ast.parse(script)
    return ({a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            | {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)})


def test_every_draft_fits_reads_in_the_frameworks_words_and_imports_the_framework_alone():
    long = {}
    for fid, text in drafts().items():
        f = BY_ID[fid]
        script = first_python_block(text)
        assert not upstream.VOCABULARY.search(text), (fid, upstream.VOCABULARY.findall(text))
        assert f.title in text and f"`python -m poolgrad.upstream {fid}`" in text
        assert imports(script) - ALSO_IMPORTED == {"numpy", registry.get(f.framework).import_name}, fid
        # A call that raises (or a process that dies) is the exit status 1; the others compare.
        assert ("EXPECTED" not in script) if raises(fid) else ("raise SystemExit(0 if ok else 1)" in script), fid
        if len(script.splitlines()) > upstream.MAX_SCRIPT_LINES or len(text.splitlines()) > upstream.MAX_DRAFT_LINES:
            long[fid] = len(script.splitlines()), len(text.splitlines())
    assert long == {}


def test_the_vocabulary_is_poolgrads_not_the_frameworks():
    # Policy keys with a value, the spec, verdict and impact names; a framework's own argument
    # (padding='SAME') and plain words (an error, a crash) are not.
    for text in ("tie=first", "accumulate=dtype", "nan=scan", "the spec's result", "this policy", "inconsistent_modes",
                 "gradient_misrouted", "conforms"):
        assert upstream.VOCABULARY.search(text), text
    for text in ("return_mask=True ignores padding='SAME'", "the call raises an error", "a crash", "the specified"):
        assert not upstream.VOCABULARY.search(text), text


def test_the_reproducer_uses_the_frameworks_idiom_and_the_references_values():
    text = draft("mlx-avg-window-sum-overflows")
    script = first_python_block(text)
    # The five-line bug: nn.AvgPool1d(2) on float16 [60000, 60000] gives inf, 60000 expected.
    assert "pool = nn.AvgPool1d(2)" in script and "x = np.array([[[60000.0, 60000.0]]]" in script
    assert "EXPECTED = {'output': [[[60000.0]]]}" in script
    assert "the output is `[[[inf]]]` where `[[[60000.0]]]` is expected" in text
    # Frameworks that do the same (JAX and TensorFlow overflow there too) are not listed as others.
    assert "jax" not in text.split("**Expected:**")[1] and "tensorflow" not in text.split("**Expected:**")[1]


def test_a_large_calls_repeated_values_are_written_by_their_run():
    assert literals.literal(np.tile([3.0, 1.5], 20)) == "np.resize([3.0, 1.5], (40,))"
    assert literals.literal(np.ldexp(1.0, np.arange(40) % 6)) == "np.resize(np.ldexp(1.0, np.arange(6)), (40,))"
    assert eval(literals.literal(np.arange(40.0).reshape(2, 20)), {"np": np}).tolist() == np.arange(40.0).reshape(2, 20).tolist()
    one_hot = np.zeros((1, 1, 8, 8))
    one_hot[0, 0, 0, 0] = 1.0
    assert literals.literal(one_hot) == "np.where(np.arange(64).reshape((1, 1, 8, 8)) == 0, 1.0, 0.0)"
    assert eval(literals.literal(one_hot), {"np": np}).tolist() == one_hot.tolist()
    last = np.full(40, 2.5)
    last[-1] = -1.0
    assert eval(literals.literal(last), {"np": np}).tolist() == last.tolist()


def test_call_arguments_are_written_as_users_write_them():
    call = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 1), "ceil_mode": False}
    assert literals.call_args(call, ["kernel_size"], {"stride": (2, 2), "padding": 0, "ceil_mode": False}) == "2, padding=(0, 1)"


@pytest.mark.parametrize("finding_id", ALONE)
def test_the_draft_runs_alone_and_exits_1_while_the_behaviour_holds(finding_id, tmp_path, capsys):
    f = BY_ID[finding_id]
    if not registry.installed(f.framework):
        pytest.skip(f"{f.framework} is not installed")
    assert any(fnmatch.fnmatchcase("cpu", d) for d in f.devices) and not upstream.report_of(f)
    assert upstream.main([finding_id]) == 0
    text = capsys.readouterr().out
    assert registry.installed_version(f.framework) in text and len(text.splitlines()) <= upstream.MAX_DRAFT_LINES
    script = first_python_block(text)
    assert len(script.splitlines()) <= upstream.MAX_SCRIPT_LINES
    (tmp_path / "repro.py").write_text(script)
    out = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})  # nothing of poolgrad importable
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert "\n  expected " in out.stdout  # actual against expected


def run_in_one_process(scripts: dict[str, str], tmp_path) -> dict[str, tuple]:
    """Each script's exit status and the exception it ended on (None: it exited), the scripts run
    in one process (repro_runs.run_together)."""
    paths = {}
    for fid, script in scripts.items():
        paths[fid] = tmp_path / f"{fid}.py"
        paths[fid].write_text(script)
    return {fid: (ran.returncode, ran.raised) for fid, ran in zip(paths, repro_runs.run_together(list(paths.values())))}


def cpu_drafts(framework: str) -> Iterator[tuple[str, str]]:
    """The framework's drafts whose finding holds on CPU, on a variant installed here (torchvision's
    need torchvision), in the installed release (a behaviour fixed before it cannot exit 1 here):
    the scripts this machine can check, (finding id, script), rendered as read."""
    release = registry.installed_version(framework)
    return ((f.id, first_python_block(draft(f.id))) for f in KB
            if not upstream.report_of(f) and f.framework == framework and any(fnmatch.fnmatchcase("cpu", d) for d in f.devices)
            and version_in(str(f.versions), release) and any(registry.installed(framework, v) for v in finding_text.variants_of(f)))


def raises(fid: str) -> bool:
    """Whether the behaviour is that the call raises (or the process dies): elsewhere the script
    exits 1 by its comparison, never by an exception of its own."""
    return BY_ID[fid].verdict in upstream.RAISES


def sample(scripts: Iterator[tuple[str, str]]) -> dict[str, str]:
    """A few cheap ones: no torch.compile (seconds each), no process that dies or writes out of
    bounds, no result by no rule (verdict wrong: the reference cannot tell which box of the
    example shows it, the command picks it by running it; -m slow runs those as it drafts them)."""
    cheap = ((fid, s) for fid, s in scripts
             if "torch.compile" not in s and BY_ID[fid].verdict not in ("crash", "wrong") and "bounds" not in fid)
    return dict(itertools.islice(cheap, SAMPLE))


@pytest.mark.parametrize("framework", list(registry.FRAMEWORKS))
def test_a_sample_of_each_frameworks_reproducers_exits_1(framework, tmp_path):
    if not registry.installed(framework):
        pytest.skip(f"{framework} is not installed")
    scripts = sample(cpu_drafts(framework))
    assert scripts
    codes = run_in_one_process(scripts, tmp_path)
    assert {fid: c for fid, c in codes.items() if c[0] != 1 or (c[1] and not raises(fid))} == {}


@pytest.mark.slow
@pytest.mark.parametrize("framework", list(registry.FRAMEWORKS))
def test_every_reproducer_of_a_cpu_finding_runs_alone_and_exits_1(framework, tmp_path, request):
    if "slow" not in request.config.getoption("markexpr"):
        pytest.skip("all reproducers run alone: minutes; pytest -m slow")
    if not registry.installed(framework):
        pytest.skip(f"{framework} is not installed")
    failed = {}
    for fid, _ in cpu_drafts(framework):
        # As `python -m poolgrad.upstream ID` drafts it here: on an input checked by running it.
        text = upstream.draft(KB, BY_ID[fid], verify=True)
        script = first_python_block(text)
        if len(script.splitlines()) > upstream.MAX_SCRIPT_LINES or len(text.splitlines()) > upstream.MAX_DRAFT_LINES:
            failed[fid] = "the input that shows it here is too long", len(script.splitlines()), len(text.splitlines())
        (tmp_path / "repro.py").write_text(script)
        try:
            out = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            failed[fid] = "no exit within 180 s"
            continue
        if out.returncode != 1 or ("\n  expected " not in out.stdout and not raises(fid)):
            failed[fid] = (out.returncode, (out.stdout + out.stderr)[-300:])
    assert failed == {}


def test_the_same_reproducer_exits_0_on_an_input_the_framework_handles_as_expected(tmp_path):
    f = BY_ID["torch-max-last-nan-wins"]
    if not registry.installed(f.framework):
        pytest.skip("torch is not installed")
    # The example's call with one NaN per window: no window has several, so torch returns what
    # users expect.
    case = upstream.example_case(f)
    target = upstream.target_of(f, case)
    x = np.array([[[[1.0, np.nan, 3.0, 2.0, 0.5, 0.0]]]], dtype=case.input.dtype)
    g = np.ldexp(1.0, np.arange(14)).reshape(1, 1, 2, 7).astype(x.dtype)
    script = upstream.script(f, case, target, x, g, mode_of(f))
    assert run_in_one_process({"one-nan": script}, tmp_path) == {"one-nan": (0, None)}


def test_run_puts_the_reproducers_output_in_the_draft(capsys):
    f = BY_ID["mlx-avg-window-sum-overflows"]
    if not registry.installed(f.framework):
        pytest.skip("mlx is not installed")
    assert upstream.main([f.id, "--run"]) == 0
    text = capsys.readouterr().out
    output = re.search(r"^Its output here \(exit status (\S+)\):\n\n```\n(.*?)^```$", text, re.S | re.M)
    assert output[1] == "1" and "output: [[[inf]]]\n  expected [[[60000.0]]]" in output[2]
    assert text.index("```python") < output.start()  # the reproducer stays the first block


def own_finding(tmp_path, fid: str, extra: str) -> Knowledge:
    (tmp_path / "mine.toml").write_text(f'''[[finding]]
id = "{fid}"
title = "A finding of my own"
impact = "valid_subgradient"
framework = "torch"
ops = ["max_pool*"]
when = ["ties"]
policy = {{tie = "last"}}
behaviour = "The kernel keeps the last of tied maxima, which this entry says only to test the drafts of reports."
source = "my_kernel.cpp"
{extra}
''')
    return sources.load(extra=[tmp_path / "mine.toml"])


def test_a_finding_reported_upstream_gets_no_draft_but_its_link(tmp_path, capsys):
    url = "https://github.com/pytorch/pytorch/issues/1"
    knowledge = own_finding(tmp_path, "reported", f'upstream = [{{type = "report", url = "{url}"}}]')
    with pytest.raises(upstream.Reported, match=re.escape(url)):
        upstream.draft(knowledge, next(f for f in knowledge if f.id == "reported"))
    assert upstream.main(["reported", "--findings", str(tmp_path / "mine.toml")]) == 0
    out = capsys.readouterr()
    assert out.out == "" and url in out.err


def test_a_finding_without_an_example_is_refused_by_name(tmp_path):
    knowledge = own_finding(tmp_path, "no-example", "upstream = []")
    with pytest.raises(upstream.NoDraft, match="'no-example' has no example case file .*'example'"):
        upstream.draft(knowledge, next(f for f in knowledge if f.id == "no-example"))

"""Every reproducer prints the spec's result beside exactly the gradient that was recorded,
names the cells that differ and exits 1 while they do (0 where the framework conforms).

The records are made the real-world way: the framework is called directly (reports_direct.py,
one process per framework), its gradient goes into the record, the report is built, and the
reproducer scripts in it run away from the checkout: the first as a user runs it, the others in
one fresh interpreter where poolgrad cannot be imported (repro_runs.py). The script's
plain-NumPy spec is checked against poolgrad's reference on catalogue cases of every op, and its
arrays are compact."""

from __future__ import annotations

import html as htmllib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import repro_runs

from poolgrad.adapters import registry
from poolgrad.adapters.base import Target
from poolgrad.reference import PoolSpec
from poolgrad.reference.geometry import output_shape
from poolgrad.reports import html, reproducer, synthetic
from poolgrad.reports.records import decode_array

HERE = Path(__file__).parent
# Half-precision dtypes: the path where a script could round its input differently.
CASES = [("torch", "bfloat16"), ("tensorflow", "float16"), ("jax", "bfloat16")]


def _run(args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("framework, dtype", CASES, ids=[f"{f}-{d}" for f, d in CASES])
def test_reproducers_reprint_the_recorded_gradient(framework, dtype, tmp_path):
    if not registry.installed(framework):
        pytest.skip(f"{framework} is not installed")
    direct = _run([str(HERE / "reports_direct.py"), framework, dtype])
    assert direct.returncode == 0, direct.stderr[-2000:]
    grads = json.loads(direct.stdout.splitlines()[-1])
    spec, x, g = synthetic.tie_case(dtype)
    records = [synthetic.environment("direct")]
    for i, (variant, grad) in enumerate(grads.items()):
        records.append(synthetic.result(f"tie-{variant}", "ties_overlap", spec, x, g, framework=framework,
                                        variant=variant, run_id="direct", grad_input=decode_array(grad, dtype)))
        if i % 2:  # as if batched with other cases: the script rebuilds a call of that shape
            records[-1]["call_shape"] = [3 * x.shape[0] * x.shape[1] + 1, 1, *x.shape[2:]]
    assert any(rec.get("call_shape") for rec in records[1:])
    report = html.write_html(records, tmp_path / "r.html")
    in_report = [htmllib.unescape(s) for s in
                 re.findall(r'<pre class="repro"[^>]*>(.*?)</pre>', (tmp_path / "r.html").read_text(), re.S)]
    assert len(in_report) == len(report.divergences)
    paths = []
    for rec in records[1:]:
        script = reproducer.script(rec)
        if not rec["verdict"] == "conforms":
            assert script in in_report
        paths.append(tmp_path / f"repro_{rec['variant']}.py")  # not keras.py: it would shadow the package
        paths[-1].write_text(script)
    ran = [repro_runs.run_alone(paths[0]), *repro_runs.run_together(paths[1:])]
    for rec, out in zip(records[1:], ran, strict=True):
        printed = reproducer.read_output(out.stdout)
        assert printed["gradient"]["actual"] == rec["grad_input"], f"{rec['target']}: {out.stderr[-2000:]}"
        assert printed["gradient"]["expected"] == rec["expected_grad_input"], rec["target"]
        # Exit 1 while the framework's result is not the spec's, each differing cell named.
        assert out.returncode == (0 if rec["verdict"] == "conforms" else 1), f"{rec['target']}: {out.stderr[-2000:]}"
        named = re.findall(r"\((\d+(?:, \d+)*)\) expected", printed["gradient"].get("differ", ""))
        assert [list(map(int, c.split(", "))) for c in named] == rec["differing_cells"], rec["target"]


def test_scripts_run_together_as_each_runs_alone_but_without_poolgrad(tmp_path):
    """repro_runs' driver gives each script its own output and exit status, as `python script`
    does, and an import of poolgrad fails there (it is installed in this interpreter)."""
    scripts = {"exits": "import sys\nprint('one')\nsys.exit(3)\n", "raises": "print('two')\nraise ValueError('boom')\n",
               "says": "import sys\nsys.exit('why')\n", "ends": "import sys\nprint(sys.argv[0][-7:])\n",
               "imports": "import poolgrad\n"}
    paths = []
    for name, code in scripts.items():
        paths.append(tmp_path / f"{name}.py")
        paths[-1].write_text(code)
    together = repro_runs.run_together(paths)
    alone = [repro_runs.run_alone(path) for path in paths[:-1]]
    assert [(r.stdout, r.returncode) for r in together[:-1]] == [(r.stdout, r.returncode) for r in alone] \
        == [("one\n", 3), ("two\n", 1), ("", 1), ("ends.py\n", 0)]
    assert "ValueError: boom" in together[1].stderr and together[2].stderr == "why\n"
    assert [r.raised for r in together] == [None, "ValueError", None, None, "ModuleNotFoundError"]
    assert together[-1].returncode == 1 and "No module named 'poolgrad'" in together[-1].stderr


# Specs a framework's plan has no call for: k2 s1 SAME over 3 pads (0, 1), which torch's one
# symmetric pad per dim cannot say; Keras has no ceil_mode; flax.linen passes no dilation.
REFUSED = [("torch", "eager", {"padding": "SAME"}), ("tensorflow", "keras", {"ceil_mode": True}),
           ("jax", "flax", {"dilation": 2})]


@pytest.mark.parametrize("framework, variant, change", REFUSED, ids=[f"{f}-{v}" for f, v, _ in REFUSED])
def test_a_spec_the_plan_refuses_is_not_reproducible_for_the_plans_reason(framework, variant, change):
    spec, x, _ = synthetic.tie_case()
    spec = {**spec, **change}
    ps = PoolSpec.from_dict(spec)
    g = np.ones(output_shape(ps, x.shape), x.dtype)
    rec = synthetic.result("refused", "ties", spec, x, g, framework=framework, variant=variant, run_id="r")
    reason = registry.unsupported(Target(framework, variant, "cpu"), ps, x.shape)
    assert reason
    with pytest.raises(reproducer.NotReproducible, match=re.escape(reason)):
        reproducer.script(rec)
    assert reproducer.safe_script(rec) is None  # the report says there is no script


def test_values_from_results_cannot_become_code():
    spec, x, g = synthetic.tie_case()
    rec = synthetic.result('x"""\nimport os; os.system("echo pwned")\n', "ties", spec, x, g,
                           framework="jax", variant="eager", run_id="r")
    script = reproducer.script(rec)
    compiled = compile(script, "repro.py", "exec")
    assert "system" not in compiled.co_names  # the id is a string constant, not a call


def _script_spec(spec, shape) -> dict:
    """The namespace of a script's NumPy spec (templates/reproducer_spec.py.j2) for ``spec``, with
    the script's own rounding to the dtype (a RoI crop is rounded before it is pooled)."""
    base = (Path(reproducer.__file__).parent / "templates" / "reproducer_base.py.j2").read_text()
    code = base[base.index("def round_to_dtype"):base.index("def shortest")] + reproducer._ENV.from_string(
        '{% include "reproducer_spec.py.j2" %}').render(**reproducer.spec_context(spec, shape, spec.dtype))
    ns = {"np": np, "math": math, "DTYPE": spec.dtype}
    exec(code, ns)
    return ns


def test_the_scripts_numpy_spec_is_the_reference():
    """templates/reproducer_spec.py.j2 (what a script expects) against poolgrad.reference on every
    7th catalogue case but RoI's: forward, gradient and (max ops) the forward-mode derivative."""
    from poolgrad.cases import catalogue
    from poolgrad.reference import backward, forward
    from poolgrad.reference.dtypes import round_to
    from poolgrad.verdicts import ad_modes, tolerances
    from poolgrad.verdicts.compare import same_bits, within

    cases = [c for c in catalogue() if not c.spec.is_roi][::7]  # RoI: the test below
    ops = set()
    for c in cases:
        ns = _script_spec(c.spec, c.input.shape)
        x, g, t = (a.astype(np.float64) for a in (c.input, c.grad_output, ad_modes.direction(c.spec, c.input)))
        with np.errstate(all="ignore"):
            mine = ns["spec_result"](x, g, t)
            scale = None if c.spec.is_max else ns["spec_scale"](x, g)
            for key, ref in (("forward", forward(c.spec, c.input)), ("grad", backward(c.spec, c.input, c.grad_output))):
                got = round_to(mine[key], c.input.dtype)
                same = (same_bits(got, ref) if c.spec.is_max else
                        within(got, ref, tolerances.bound(c.spec.op, c.input.dtype, scale[key])))
                assert same.all(), (c.id, key)
        if c.spec.is_max and c.input.size:
            assert same_bits(round_to(mine["derivative"], c.input.dtype),
                             ad_modes.expected("jvp", c.spec, c.input, c.grad_output)).all(), c.id
        ops.add(c.spec.op)
    assert {"max_pool", "avg_pool", "lp_pool", "adaptive_max_pool", "adaptive_avg_pool"} <= ops


def test_the_scripts_numpy_spec_of_roi_ops_is_the_reference():
    """templates/reproducer_roi_spec.py.j2 (what a RoI script expects: each box's bins from its
    coordinates) against poolgrad.reference on every RoI catalogue case and a few more: forward
    and gradient bit for bit (the script adds in the reference's order), and for the ops compared
    within a bound the size it scales, reference.error_scale."""
    from poolgrad.cases import catalogue
    from poolgrad.reference import backward, error_scale, forward
    from poolgrad.reference.dtypes import round_to
    from poolgrad.verdicts.compare import same_bits

    cases = [(c.id, c.spec, c.input, c.grad_output) for c in catalogue() if c.spec.is_roi]
    # What no catalogue case has: crop points in [-1, 0) and past the last pixel (they take the
    # extrapolation value, though a clamp would give them pixels); two crop points apart in float64
    # and tied once rounded to float32 (the first takes the gradient); a reversed box of roi_pool
    # (one pixel).
    ramp = np.random.default_rng(3).permutation(20).reshape(1, 1, 4, 5)
    hand = [({"op": "roi_crop_max_pool2d", "boxes": [[0, -0.5, -0.75, 4.5, 3.25]], "output_size": 2,
              "kernel_size": 2, "stride": 1}, ramp),
            ({"op": "roi_crop_max_pool2d", "boxes": [[0, 0, 0, 0.5, 0]], "output_size": 1, "kernel_size": 2},
             np.array([[[[1, 1 + 2.0 ** -23], [0, 0]]]])),
            ({"op": "roi_pool2d", "boxes": [[0, 3, 3, 1.5, 1]], "output_size": 2}, ramp)]
    for spec_dict, x in hand:
        spec = PoolSpec.from_dict({**spec_dict, "dtype": "float32"})
        shape = output_shape(spec, x.shape)
        g = np.ldexp(1.0, np.arange(np.prod(shape))).reshape(shape)
        cases.append((f"hand {spec_dict}", spec, x.astype(np.float32), g.astype(np.float32)))
    for case_id, spec, x, g in cases:
        ns = _script_spec(spec, x.shape)
        x64, g64 = x.astype(np.float64), g.astype(np.float64)
        with np.errstate(all="ignore"):
            mine = ns["spec_result"](x64, g64)
            if not spec.is_max:
                scale = ns["spec_scale"](x64, g64)
                for key, ref in zip(("forward", "grad"), error_scale(spec, x, g)):
                    assert np.array_equal(scale[key], ref, equal_nan=True), (case_id, key)
        for key, ref in (("forward", forward(spec, x)), ("grad", backward(spec, x, g))):
            assert same_bits(round_to(mine[key], x.dtype), ref).all(), (case_id, key)
    assert {spec.op for _, spec, *_ in cases} == {"roi_pool", "roi_align", "roi_crop_max_pool"}


def test_case_arrays_are_written_compactly():
    spec = {"op": "max_pool2d", "kernel_size": 2, "dtype": "float32"}
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    ps = PoolSpec.from_dict(spec)
    from poolgrad.reference.probes import routing_probe
    g = routing_probe(output_shape(ps, x.shape), "float32", 4)
    rec = synthetic.result("big", "realistic", spec, x, g, framework="torch", variant="eager", run_id="r")
    script = reproducer.script(rec)
    assert "# the routing probe" in script and "unpack(" in script
    # float32 bytes, compressed: not the decimal literal of 6144 values (about 130 KB in the record)
    assert len(script) < 4 * x.nbytes / 3 + 12_000 < len(json.dumps(rec["input"]))
    ns = {"np": np}
    exec(script[script.index("def unpack"):script.index("def encode")], {**ns, "zlib": __import__("zlib"),
                                                                          "base64": __import__("base64")}, ns)
    line = next(s for s in script.splitlines() if s.startswith("x64 = "))
    assert np.array_equal(eval(line.removeprefix("x64 = "), ns), x.astype(np.float64))

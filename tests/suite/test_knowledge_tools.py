"""The tools around the knowledge base: a results file judged again (replay) agrees with the
run, characterize proposes findings for what nothing explains, the lanes' history counts per
finding and release, and what a framework's environment decides of its kernels (its Dispatch) is
what findings scope on and what names a lane."""

import json

import numpy as np

from poolgrad.adapters import onednn, registry
from poolgrad.adapters.base import OK, Outcome, Target
from poolgrad.cases import make_case
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.history import merged
from poolgrad.knowledge.machine import Machine
from poolgrad.knowledge.schema import parse_finding
from poolgrad.reference import PoolSpec
from poolgrad.reports import synthetic
from poolgrad.reports.records import read_results, write_record
from poolgrad.suite.characterize import propose
from poolgrad.suite.check import check
from poolgrad.suite.history import build, by_framework, lane_environment, lane_name, table
from poolgrad.suite.replay import JUDGED, judge_record, main as replay_main
from poolgrad.verdicts import Policy

TARGET = Target("otherfw", "eager", "cpu")  # a framework no installed findings file speaks of
SPEC = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 2, "stride": 2, "dtype": "float32"})
NAN_LAST = {"id": "last-nan", "title": "last NaN", "framework": "otherfw", "when": ["nan_several"],
            "policy": {"nan_tie": "last"}, "behaviour": "what it does", "source": "kernel.cc: f",
            "link": "no upstream report"}
MACHINE = {"cpu": "test", "cpu_features": ["avx2"]}


def _run(path, version, knowledge, policy, device="cpu"):
    """A results file as a run writes it: cases with several NaNs and plain ones, the framework
    following ``policy``."""
    cases = [make_case(f"c{i}-{version}", "user", SPEC, np.array([[v]], dtype=np.float32)) for i, v in enumerate((
        [np.nan, np.nan, 1, 2], [1, 2, np.nan, np.nan], [1, 2, 3, 4]))]
    with open(path, "w") as fh:
        for case in cases:
            r = Policy(**policy).evaluate(case.spec, case.input, case.grad_output)
            outcome = Outcome(OK, forward=r.forward, grad_input=r.grad_input, info={"call_shape": [1, 1, 4]})
            target = Target(TARGET.framework, TARGET.variant, device)
            write_record(fh, {**check(case, target, version, [outcome], knowledge, 0.0).record, "run_id": "r"})
        write_record(fh, {**synthetic.environment("r", versions={"otherfw": version}), **MACHINE})
    return path


def test_replaying_a_results_file_judges_as_the_run_did(tmp_path):
    kb = Knowledge([parse_finding(NAN_LAST, 0)])
    envs, results = read_results(_run(tmp_path / "r.jsonl", "2.13.0", kb, {"nan_tie": "last"}))
    for rec in results:
        j = judge_record(rec, kb, envs[0])
        assert j.outcome == rec["outcome"] and [f.id for f in j.explained_by] == [f["id"] for f in rec["findings"]]


def test_a_result_of_another_shape_or_without_a_gradient_replays_as_the_run_judged_it(tmp_path):
    """A path that returns indices and a forward of another shape (paddle's with_index under
    SAME pads), an empty forward where the spec has elements, or a forward alone is judged again
    on what it returned, as the run judged it."""
    case = make_case("c", "user", SPEC, np.array([[[1, 3, 2, 5]]], dtype=np.float32))
    outcomes = [Outcome(OK, forward=np.array([[[3]]], np.float32), grad_input=np.zeros((1, 1, 4), np.float32),
                        indices=np.array([[[1]]], np.int64), info={"call_shape": [1, 1, 4]}),
                Outcome(OK, forward=np.zeros((1, 1, 0), np.float32), grad_input=np.zeros((1, 1, 4), np.float32),
                        info={"call_shape": [1, 1, 4]}),
                Outcome(OK, forward=np.array([[[3, 5]]], np.float32), info={"call_shape": [1, 1, 4]})]
    path = tmp_path / "r.jsonl"
    with open(path, "w") as fh:
        for outcome in outcomes:
            write_record(fh, {**check(case, TARGET, "1.0", [outcome], Knowledge(), 0.0).record, "run_id": "r"})
        write_record(fh, {**synthetic.environment("r", versions={"otherfw": "1.0"}), **MACHINE})
    envs, results = read_results(path)
    assert [judge_record(rec, Knowledge(), envs[0]).outcome for rec in results] == [rec["outcome"] for rec in results]


def test_a_results_file_judged_again_takes_the_findings_written_since_the_run(tmp_path):
    before = _run(tmp_path / "r.jsonl", "2.13.0", Knowledge(), {"nan_tie": "last"})
    findings = tmp_path / "findings.toml"
    findings.write_text("[[finding]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in NAN_LAST.items() if k != "policy")
                        + 'policy = {nan_tie = "last"}\n')
    # written compressed where the name says so, as every results writer
    assert replay_main([str(before), "-o", str(tmp_path / "again.jsonl.gz"), "--findings", str(findings)]) == 0
    assert (tmp_path / "again.jsonl.gz").read_bytes()[:2] == b"\x1f\x8b"
    (env,), old = read_results(before)
    (env_again,), new = read_results(tmp_path / "again.jsonl.gz")
    assert env_again == env and len(new) == len(old) == 3
    assert [r["outcome"] for r in old] == ["fail", "fail", "pass"]
    assert [r["outcome"] for r in new] == ["expected", "expected", "pass"]
    assert [[f["id"] for f in r["findings"]] for r in new] == [["last-nan"], ["last-nan"], []]
    def run_fields(rec):   # the run's own fields (a field that is null is absent once rewritten)
        return {k: v for k, v in rec.items() if k not in JUDGED and v is not None}
    assert [run_fields(r) for r in new] == [run_fields(r) for r in old]


def test_characterize_proposes_a_finding_for_what_nothing_explains(tmp_path):
    envs, results = read_results(_run(tmp_path / "r.jsonl", "2.13.0", Knowledge(), {"nan_tie": "last"}))
    proposals, contradicted = propose(envs, results, Knowledge())
    assert len(proposals) == 1 and not contradicted
    p = proposals[0]
    assert p["framework"] == "otherfw" and p["results"] == 2 and "nan_several" in p["when"]
    assert p["claim"][0] == "policy"
    assert propose(envs, results, Knowledge([parse_finding(NAN_LAST, 0)]))[0] == []


def test_history_counts_where_a_finding_holds_and_where_a_release_contradicts_it(tmp_path):
    kb = Knowledge([parse_finding(NAN_LAST, 0)])
    old = _run(tmp_path / "old.jsonl", "2.11.0", kb, {})                     # fixed: canonical
    new = _run(tmp_path / "new.jsonl", "2.13.0", kb, {"nan_tie": "last"})
    hist = build([old, new], kb, MACHINE)
    assert [lane["lane"] for lane in hist["lanes"]] == ["otherfw-2.11.0", "otherfw-2.13.0"]
    assert hist["findings"]["last-nan"] == {"otherfw-2.11.0": [0, 2], "otherfw-2.13.0": [2, 0]}
    assert table(hist, kb).splitlines()[1].endswith("last-nan  >=2.13.0")
    # contradicted wherever measured: the table says so, not "any release"
    assert table(build([old], kb, MACHINE), kb).splitlines()[1].endswith("last-nan  no measured release shows it")


def test_a_gpus_results_are_a_lane_of_their_own_added_to_the_history(tmp_path):
    kb = Knowledge([parse_finding({**NAN_LAST, "devices": ["cpu", "gpu"]}, 0)])
    cpu = build([_run(tmp_path / "cpu.jsonl", "2.13.0", kb, {"nan_tie": "last"})], kb, MACHINE)
    gpu_run = _run(tmp_path / "gpu.jsonl", "2.13.0", kb, {}, device="gpu")     # canonical on the GPU
    assert build([gpu_run], kb, MACHINE, devices=("cpu",))["lanes"] == []
    both = merged(cpu, build([gpu_run], kb, MACHINE, devices=("gpu",)))
    assert [(lane["lane"], lane["device"]) for lane in both["lanes"]] == [("otherfw-2.13.0", "cpu"), ("otherfw-2.13.0-gpu", "gpu")]
    assert both["findings"]["last-nan"] == {"otherfw-2.13.0": [2, 0], "otherfw-2.13.0-gpu": [0, 2]}
    assert merged(both, build([gpu_run], kb, MACHINE, devices=("gpu",))) == both    # a lane added again replaces itself
    # each framework's lanes go to its own package's history, and read back united
    other = {**both, "lanes": [{**lane, "lane": "fw2-1.0", "framework": "fw2", "version": "1.0"} for lane in both["lanes"][:1]],
             "findings": {"f2": {"fw2-1.0": [1, 0]}}}
    parts = by_framework(merged(both, other))
    assert sorted(parts) == ["fw2", "otherfw"] and parts["otherfw"] == both and merged(*parts.values()) == merged(both, other)


def test_a_lane_run_again_replaces_what_it_measured_and_keeps_what_it_did_not(tmp_path):
    """The same release run again (a newer catalogue, a subset) replaces the counts of every
    finding it measured there; one whose scope it no longer reached keeps the earlier run's
    counts, and with them the bound they measured."""
    kb = Knowledge([parse_finding(NAN_LAST, 0)])
    first = build([_run(tmp_path / "a.jsonl", "2.11.0", kb, {})], kb, MACHINE)
    first["findings"]["unreached"] = {"otherfw-2.11.0": [0, 3]}     # measured by the earlier run only
    again = build([_run(tmp_path / "b.jsonl", "2.11.0", kb, {"nan_tie": "last"})], kb, MACHINE)
    both = merged(first, again)
    assert both["findings"] == {"last-nan": {"otherfw-2.11.0": [2, 0]}, "unreached": {"otherfw-2.11.0": [0, 3]}}
    assert both["lanes"] == again["lanes"]


def test_a_frameworks_environment_decides_the_kernel_features_and_facts_findings_see():
    """TensorFlow's oneDNN (poolgrad/adapters/onednn.py): its ISA cap, from the run's switches or
    the adapter's report, limits the features; oneDNN off leaves none. A framework that declares
    no dispatch sees the CPU's features whatever the switches."""
    features = ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]

    def machine(switches, environment):
        return Machine.from_environment({"cpu_features": features, "env_switches": switches,
                                         "frameworks": {"tensorflow": {"environment": environment}}})
    on = {"onednn": True}
    assert machine({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}, on).kernel_features("tensorflow") == {"avx2", "avx512f"}
    assert "avx512_bf16" in machine({"DNNL_MAX_CPU_ISA": "AVX512_CORE_BF16"}, on).kernel_features("tensorflow")
    assert machine({}, {**on, "ONEDNN_MAX_CPU_ISA": "AVX2"}).kernel_features("tensorflow") == {"avx2"}
    assert machine({}, on).facts("tensorflow") == {"onednn": True}
    off = machine({}, {"onednn": False})
    assert off.kernel_features("tensorflow") == frozenset() and off.facts("tensorflow") == {"onednn": False}
    assert machine({"ONEDNN_MAX_CPU_ISA": "AVX2"}, on).kernel_features("jax") == set(features)
    assert onednn.isa_features("DEFAULT") is None
    # a run records a framework's environment with the switches it declares, no other's
    torch = registry.get("torch").dispatch_environment({"ONEDNN_MAX_CPU_ISA": "AVX2", "XLA_FLAGS": "-"}, {"mkldnn": True})
    assert torch == {"ONEDNN_MAX_CPU_ISA": "AVX2", "mkldnn": True}


def test_an_older_results_file_with_the_isa_cap_at_the_top_reads_and_names_its_lane_the_same(tmp_path):
    """Results written before the frameworks recorded their dispatch carry onednn_max_cpu_isa at
    the top (and the cap in env_switches): they still read, and the lane is named by the cap."""
    path = tmp_path / "old.jsonl"
    old = {**synthetic.environment("r", versions={"tensorflow": "2.21.0"}, switches={"ONEDNN_MAX_CPU_ISA": "AVX2"}),
           "cpu_features": ["avx2", "avx512f"], "onednn_max_cpu_isa": "AVX2"}
    with open(path, "w") as fh:
        write_record(fh, old)
    (env,), _ = read_results(path)
    assert Machine.from_environment(env).kernel_features("tensorflow") == {"avx2"}
    assert lane_name(env, "tensorflow", "2.21.0") == "tensorflow-2.21.0-isa-avx2"
    assert lane_environment(env, "tensorflow") == {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    off = {**old, "env_switches": {"TF_ENABLE_ONEDNN_OPTS": "0"}, "onednn_max_cpu_isa": None}
    assert lane_name(off, "tensorflow", "2.21.0+cpu") == "tensorflow-2.21.0-onednn-off"
    assert lane_name({**old, "env_switches": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}, "jax", "0.10.2") == "jax-0.10.2"

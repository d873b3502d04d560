import json
import subprocess
import sys
from pathlib import Path

from poolgrad.reports.__main__ import main
from poolgrad.reports.records import read_results
from reports_recorded import TF_FINDING, TIE_ID, VERSIONS, run_records, write

ROOT = Path(__file__).resolve().parents[2]


def shards(records, n):
    """What n shard processes of one run write: each its own run id, environment and share of cases."""
    env, results = records[0], records[1:]
    out = []
    for i in range(n):
        run_id = f"shard-{i}"
        part = [{**r, "run_id": run_id, "duration_s": 0.5 * i} for r in results[i::n]]
        out.append([*part, {**env, "run_id": run_id, "shard": f"{i + 1}/{n}"}])  # environment written last
    return out


def test_four_shards_merge_to_the_bytes_of_the_unsharded_run(tmp_path):
    full = run_records("unsharded")
    write(tmp_path / "full.jsonl", full)
    paths = [write(tmp_path / f"s{i}.jsonl", part) for i, part in enumerate(shards(full, 4))]
    assert main(["merge", str(tmp_path / "full.jsonl"), "-o", str(tmp_path / "a.jsonl")]) == 0
    # reversed order and a duplicated shard must not matter
    assert main(["merge", *map(str, reversed(paths)), str(paths[0]), "-o", str(tmp_path / "b.jsonl")]) == 0
    a, b = (tmp_path / "a.jsonl").read_bytes(), (tmp_path / "b.jsonl").read_bytes()
    assert a == b
    lines = [{"record": "result", **json.loads(line)} for line in a.splitlines()]  # no "record": a result
    assert [r["record"] for r in lines].count("environment") == 1
    # every case's arrays once, in a case record; the results refer to it
    cases = [r for r in lines if r["record"] == "case"]
    assert sorted(r["case_id"] for r in cases) == sorted({r["case_id"] for r in full if r["record"] == "result"})
    assert len([r for r in lines if r["record"] in ("result", "environment")]) == len(full)
    # every finding's summary once, before the results that name it by id
    named = [f for r in lines if r["record"] == "result" for f in r.get("findings") or ()]
    described = [r["id"] for r in lines if r["record"] == "finding"]
    assert named and all(isinstance(f, str) for f in named) and sorted(described) == sorted(set(named))
    assert all("input" not in r for r in lines if r["record"] == "result")


def test_two_shards_build_the_same_report_as_the_unsharded_run(tmp_path):
    full = run_records("unsharded")
    write(tmp_path / "full.jsonl", full)
    paths = [write(tmp_path / f"s{i}.jsonl", part) for i, part in enumerate(shards(full, 2))]
    main(["build", str(tmp_path / "full.jsonl"), "-o", str(tmp_path / "a.html")])
    main(["build", *map(str, paths), "-o", str(tmp_path / "b.html")])
    assert (tmp_path / "a.html").read_bytes() == (tmp_path / "b.html").read_bytes()


def test_versions_of_one_target_stay_apart_in_a_merge(tmp_path):
    old = run_records("old", versions={**VERSIONS, "torch": "2.12.1+cpu"})
    new = run_records("new")
    main(["merge", str(write(tmp_path / "o.jsonl", old)), str(write(tmp_path / "n.jsonl", new)),
          "-o", str(tmp_path / "m.jsonl")])
    envs, results = read_results(tmp_path / "m.jsonl")
    assert {r["framework_version"] for r in results if r["framework"] == "torch"} == {"2.12.1+cpu", "2.13.0+cpu"}
    assert len(envs) == 2


def test_diff_of_a_run_with_itself_is_empty_and_exits_0(tmp_path, capsys):
    path = write(tmp_path / "a.jsonl", run_records())
    assert main(["diff", str(path), str(path)]) == 0
    assert "behaviour changed: no" in capsys.readouterr().out


def test_diff_of_labels_alone_lists_them_and_exits_0(tmp_path, capsys):
    """The same arrays judged by another knowledge base: outcomes differ, behaviour does not."""
    base = write(tmp_path / "a.jsonl", run_records())
    relabelled = run_records(tf_known=False)
    for r in relabelled:  # and a policy label the search could have chosen among coinciding ones
        if r["record"] == "result" and r["framework"] == "jax" and r["case_id"] == TIE_ID:
            r["policy"] = {"tie": "all", "nan": "ignore"}
    assert main(["diff", str(base), str(write(tmp_path / "b.jsonl", relabelled)), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert not d["behaviour_changed"] and not d["behaviour_changes"] and not d["new_divergences"]
    changed = {(c["case_id"], c["target"]) for c in d["label_changes"]}
    assert changed == {(TIE_ID, t) for t in ("tensorflow-eager-cpu", "tensorflow-xla-cpu", "jax-eager-cpu", "jax-jit-cpu")}
    tf = next(c for c in d["label_changes"] if c["target"] == "tensorflow-eager-cpu")
    assert tf["before"].endswith("expected (tf-tie-last)") and tf["after"].endswith("fail")
    # grouped by what explained them on each side: the finding the other knowledge base lacks, the relabelled policy
    groups = {(*g["was"]["findings"], g["was"]["outcome"], "->", *g["now"]["findings"], g["now"]["outcome"]):
              (g["results"], g["targets"]) for g in d["groups"]["label_changes"]}
    assert groups == {("tf-tie-last", "expected", "->", "fail"): (2, ["tensorflow-eager-cpu", "tensorflow-xla-cpu"]),
                      ("fail", "->", "fail"): (2, ["jax-eager-cpu", "jax-jit-cpu"])}


def test_diff_names_moved_arrays_as_a_behaviour_change(tmp_path, capsys):
    base = run_records()
    new = run_records()
    for r in new:  # tensorflow now splits ties: still a divergence, other arrays
        if r["record"] == "result" and r["framework"] == "tensorflow" and r["case_id"] == TIE_ID:
            r["grad_input"] = [[[[0, 1.5, 1.5], [1.5, 0, 4], [0, 0, 8]]]]
    assert main(["diff", str(write(tmp_path / "a.jsonl", base)), str(write(tmp_path / "b.jsonl", new))]) == 1
    out = capsys.readouterr().out
    assert ("behaviour changes: 2 results in 1 group\n  2 results on tensorflow-eager-cpu, tensorflow-xla-cpu: "
            f"tf-tie-last, pass (known) -> tf-tie-last, pass (known)\n    tf-tie-last, no impact stated: {TF_FINDING['title']}"
            f"\n    e.g. {TIE_ID} on tensorflow-eager-cpu: policy (nan=propagate, tie=last) -> the same, other arrays\n") in out


def test_diff_names_a_version_change_and_a_policy_change(tmp_path, capsys):
    base = run_records()
    new = run_records(versions={**VERSIONS, "jax": "0.11.0"})
    for r in new:  # the new jax routes ties to the first maximum: conforms now
        if r["record"] == "result" and r["framework"] == "jax" and r["case_id"] == TIE_ID:
            r.update(verdict="conforms", outcome="pass", policy={"tie": "first", "nan": "propagate"},
                     grad_input=r["expected_grad_input"], differing_cells=[])
    assert main(["diff", str(write(tmp_path / "a.jsonl", base)), str(write(tmp_path / "b.jsonl", new))]) == 1
    out = capsys.readouterr().out
    assert "jax: 0.10.2 -> 0.11.0" in out
    assert ("fixed: 2 results in 1 group\n  2 results on jax-eager-cpu, jax-jit-cpu: unexplained, FAIL -> conforms, pass\n"
            f"    e.g. {TIE_ID} on jax-eager-cpu: policy (nan=propagate, tie=all) -> conforms") in out
    assert "\nnew divergences: none\n" in out and "targets gone" not in out


def test_diff_with_only_a_version_change_exits_0(tmp_path, capsys):
    base = write(tmp_path / "a.jsonl", run_records())
    new = run_records(versions={**VERSIONS, "torch": "2.14.0"})
    # a framework installed beside them, with no results in either run, is no version change
    new[0]["frameworks"]["mlx"] = {"version": "0.32.4", "devices": ["cpu"], "environment": {}}
    assert main(["diff", str(base), str(write(tmp_path / "b.jsonl", new))]) == 0
    out = capsys.readouterr().out
    assert "framework versions changed (1):\n  torch: 2.13.0+cpu -> 2.14.0\n" in out and "mlx" not in out


def test_diff_reports_targets_gone(tmp_path, capsys):
    recs = run_records()
    fewer = [r for r in recs if r.get("variant") != "xla"]
    main(["diff", str(write(tmp_path / "a.jsonl", recs)), str(write(tmp_path / "b.jsonl", fewer))])
    assert "targets gone (1):\n  tensorflow-xla-cpu" in capsys.readouterr().out


def test_cli_runs_as_a_module_and_refuses_bad_input_with_exit_2(tmp_path):
    (tmp_path / "bad.jsonl").write_text("not json\n")
    r = subprocess.run([sys.executable, "-m", "poolgrad.reports", "build", str(tmp_path / "bad.jsonl"), "-o",
                        str(tmp_path / "x.html")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "bad.jsonl:1: not a JSON object" in r.stderr

"""The publishing workflow (.github/workflows/conformance.yml) stays safe and real: every action
pinned to a full commit SHA with its version beside it, no checkout that leaves the token in the
working tree, nothing granted by default, and one job per release lane of the noxfile."""

import importlib.util
import re
import warnings
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="needs PyYAML (the dev extra)")
pytest.importorskip("nox", reason="needs nox (the dev extra) to import noxfile.py")

ROOT = Path(__file__).resolve().parents[1]
# by its path: the checkout's root is on sys.path only under `python -m pytest`


def _noxfile(path: Path):
    spec = importlib.util.spec_from_file_location(f"noxfile_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        # each noxfile registers its own `lane` session in nox's one registry; nox runs one file
        warnings.simplefilter("ignore", FutureWarning)
        spec.loader.exec_module(module)
    return module


noxfile = _noxfile(ROOT / "noxfile.py")
# plugin directory name -> its noxfile's lanes
PLUGIN_LANES = {p.parent.name: list(_noxfile(p).LANES) for p in sorted(ROOT.glob("plugins/*/noxfile.py"))}

WORKFLOW = ROOT / ".github" / "workflows" / "conformance.yml"
# owner/repo[/path]@<commit> # v<version>: the comment says which release the SHA is
PINNED_LINE = re.compile(r"uses:\s*[\w.-]+/[\w./-]+@[0-9a-f]{40}\s+#\s*v\d\S*\s*$")


def _steps(workflow):
    for name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield name, step


def problems(text: str) -> list[str]:
    """What is wrong with a workflow file's text, one line per problem."""
    workflow = yaml.safe_load(text)
    found = []
    uses = [step["uses"] for _, step in _steps(workflow) if "uses" in step]
    uses += [job["uses"] for job in workflow["jobs"].values() if "uses" in job]  # reusable workflows
    uses_lines = [line.strip() for line in text.splitlines() if re.match(r"\s*(-\s*)?uses:", line)]
    if len(uses_lines) != len(uses):
        found.append(f"{len(uses)} uses: in the workflow but {len(uses_lines)} lines start with uses: "
                     "(write each on its own line, so its pin and version comment can be checked)")
    found += [f"not pinned to a commit SHA with its version as a comment: {line}"
              for line in uses_lines if not PINNED_LINE.search(line)]
    for job, step in _steps(workflow):
        if step.get("uses", "").startswith("actions/checkout@") and \
                (step.get("with") or {}).get("persist-credentials") is not False:
            found.append(f"job {job}: checkout without persist-credentials: false")
    if workflow.get("permissions") != {}:
        found.append(f"workflow-level permissions are {workflow.get('permissions')!r}; "
                     "set permissions: {} and grant each job what it uses")
    found += [f"job {name}: no permissions: of its own" for name, job in workflow["jobs"].items()
              if "permissions" not in job]
    lanes = [job["strategy"]["matrix"]["lane"] for job in workflow["jobs"].values()
             if "lane" in job.get("strategy", {}).get("matrix", {})]
    if lanes != [list(noxfile.LANES)]:
        found.append(f"one job's matrix.lane must be noxfile.LANES {list(noxfile.LANES)}; found {lanes}")
    plugin_lanes = [[(row["plugin"], row["lane"]) for row in job["strategy"]["matrix"]["include"]]
                    for job in workflow["jobs"].values() if "include" in job.get("strategy", {}).get("matrix", {})]
    want = [(plugin, lane) for plugin, its in PLUGIN_LANES.items() for lane in its]
    if plugin_lanes != [want]:
        found.append(f"one job's matrix.include must be every plugin's noxfile LANES {want}; found {plugin_lanes}")
    caches = [job for job in workflow["jobs"].values() if "strategy" in job
              and "POOLGRAD_LANE_CACHE" not in job.get("env", {})]
    if caches:
        found.append(f"{len(caches)} lane job(s) without POOLGRAD_LANE_CACHE: their compilations are not kept")
    return found


def test_workflow_is_pinned_least_privilege_and_runs_every_lane():
    assert problems(WORKFLOW.read_text(encoding="utf-8")) == []


def test_each_unsafe_change_is_reported():
    text = WORKFLOW.read_text(encoding="utf-8")
    checkout = re.search(r"uses: actions/checkout@\S+ # \S+", text).group()
    deploy = re.search(r"- id: deploy\n\s+uses: (\S+) # \S+", text)
    changes = [
        ("not pinned", text.replace(checkout, "uses: actions/checkout@v4", 1)),
        ("not pinned", text.replace(checkout, checkout.split(" #")[0], 1)),  # no version comment
        ("not pinned", re.sub(r"(checkout@[0-9a-f]{7})[0-9a-f]{33}", r"\1", text, count=1)),  # short SHA
        ("persist-credentials", text.replace("persist-credentials: false", "persist-credentials: true", 1)),
        ("workflow-level permissions", text.replace("permissions: {}", "permissions: write-all", 1)),
        ("no permissions: of its own", text.replace("\n    permissions:\n      contents: read  # checkout", "", 1)),
        ("matrix.lane", text.replace(f"          - {next(iter(noxfile.LANES))}\n", "", 1)),
        ("matrix.include", re.sub(r"\n\s+- \{plugin: [\w-]+, lane: [\w.-]+\}", "", text, count=1)),
        ("POOLGRAD_LANE_CACHE", re.sub(r"\n\s+POOLGRAD_LANE_CACHE: .*", "", text, count=1)),
        ("on its own line", text.replace(deploy.group(), f"- {{id: deploy, uses: {deploy.group(1)}}}", 1)),
    ]
    for expected, changed in changes:
        assert changed != text, expected
        assert any(expected in p for p in problems(changed)), expected

"""Build and show the release lanes' history (poolgrad/knowledge/history.py has what it means):

    python -m poolgrad.suite.history build out/lanes/*.jsonl      # re-judge lane results, write the history
    python -m poolgrad.suite.history build --add --devices gpu gpu.jsonl   # add a GPU machine's lanes
    python -m poolgrad.suite.history show                         # findings x releases, as a table

Each framework's lanes are written to its own package's history.json (a plugin's to the
plugin's), or all to one file with -o.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from packaging.version import Version

from poolgrad.adapters import registry
from poolgrad.knowledge import sources
from poolgrad.knowledge.history import FORMAT, fixed_in, load_history, merged, per_release, version_key, version_range
from poolgrad.reports.records import read_results

from .machine import completed, record as machine_record
from .replay import judge_record


def lane_name(env: dict, framework: str, version: str) -> str:
    """framework-version, plus what set the framework's dispatch apart (its Dispatch.lane)."""
    fw = registry.declared(framework)
    return f"{framework}-{Version(version).public}" + fw.dispatch.lane(fw.environment_in(env))


def lane_environment(env: dict, framework: str) -> dict:
    """What decided the framework's dispatch (its adapter's report, the run's switches it reads),
    without the flags poolgrad sets for its own workers (thread counts, compile-cache paths)."""
    return {k: v for k, v in registry.declared(framework).environment_in(env).items() if not k.endswith("_FLAGS")}


def build(paths, knowledge, this_machine, devices=("cpu", "gpu")) -> dict:
    """Re-judge every result of the lanes' results files (of the given ``devices``);
    ``this_machine``: the machine record (suite.machine.record()) for results written before
    runs recorded their machine. A GPU's results are a lane of their own (``-gpu``)."""
    lanes, findings = {}, defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for path in paths:
        envs, results = read_results([path])
        env = envs[-1] if envs else None
        if env is None or not results:
            print(f"{path}: no environment record or no results; skipped (a lane that did not finish)", file=sys.stderr)
            continue
        env = completed(env, this_machine)
        for framework, version, device in sorted({(r["framework"], r["framework_version"], r["device"])
                                                  for r in results if r["device"] in devices}):
            name = lane_name(env, framework, version) + ("-gpu" if device == "gpu" else "")
            ran = [r for r in results if (r["framework"], r["framework_version"], r["device"]) == (framework, version, device)]
            before = lanes.get(name, {})  # one lane in several files (e.g. its compile run apart)
            lanes[name] = {"lane": name, "framework": framework, "version": Version(version).public, "device": device,
                           "variants": sorted({r["variant"] for r in ran} | set(before.get("variants", ()))),
                           "results": len(ran) + before.get("results", 0),
                           "cpu": env.get("cpu"), "cpu_features": env.get("cpu_features") or [],
                           "frameworks": {framework: lane_environment(env, framework)},
                           "suite_commit": env.get("suite_commit"), "date": env.get("date")}
            for r in ran:
                j = judge_record(r, knowledge, env)
                for f in j.explained_by:
                    findings[f.id][name][0] += 1
                for f in j.contradicted:
                    findings[f.id][name][1] += 1
    return {"format": FORMAT,
            "lanes": sorted(lanes.values(), key=lambda lane: (lane["framework"], version_key(lane["version"]), lane["lane"])),
            "findings": {fid: dict(sorted(per.items())) for fid, per in sorted(findings.items())}}


def by_framework(history: dict) -> dict[str, dict]:
    """``history`` cut into one history per framework: its lanes, and the counts measured in them."""
    out = {}
    for framework in sorted({lane["framework"] for lane in history["lanes"]}):
        names = {lane["lane"] for lane in history["lanes"] if lane["framework"] == framework}
        out[framework] = merged({"lanes": [lane for lane in history["lanes"] if lane["lane"] in names],
                                 "findings": {fid: {n: c for n, c in per.items() if n in names}
                                              for fid, per in history["findings"].items()}})
    return out


def _write(path: Path, history: dict, add: bool) -> None:
    if add and path.exists():
        history = merged(load_history(path), history)
    path.write_text(json.dumps(history, indent=1, sort_keys=True) + "\n")
    print(f"history: {path} ({len(history['lanes'])} lanes)")


def _fixes(f) -> str:
    return ", ".join(f"{r.url} ({r.state or 'state not recorded'})" for r in f.upstream if r.type == "fix")


def table(history: dict, knowledge) -> str:
    """Findings x releases: + holds, - does not hold, ~ partly, . not seen, blank: not run; a
    finding that a later release no longer shows is marked fixed in that release, with its fix
    references (a pending fix beside one that still holds)."""
    mark = {"holds": "+", "does not hold": "-", "partly": "~", "not seen": "."}
    lines = []
    for framework in sorted({f.framework for f in knowledge}):
        versions = sorted({lane["version"] for lane in history["lanes"] if lane["framework"] == framework}, key=version_key)
        lines.append(f"{framework}: " + "  ".join(versions))
        for f in (f for f in knowledge if f.framework == framework):
            rel = per_release(history, f.id)
            cells = "".join(mark.get(rel.get(v), " ").center(len(v) + 2) for v in versions)
            seen = {s for s in rel.values() if s != "not seen"}
            rng = version_range(history, f.id) or (
                "not measured" if not seen else "no measured release shows it" if seen == {"does not hold"}
                else "any release (no measured release contradicts it)")
            measured = bool(seen)
            fixed, fixes = fixed_in(history, f.id), _fixes(f)
            if fixed:
                rng += f"; fixed in {fixed}" + (f" (fix {fixes})" if fixes else "")
            elif fixes and measured:
                rng += f"; fix {fixes}"
            lines.append(f"  {cells}  {f.id}  {rng}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m poolgrad.suite.history", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="re-judge lane results files and write the history")
    b.add_argument("results", nargs="+")
    b.add_argument("-o", "--output", default=None,
                   help="one file for every lane (default: each framework's package's history.json)")
    b.add_argument("--findings", action="append", default=[], metavar="PATH", help="a findings file of your own, added to the installed frameworks' knowledge base (repeatable)")
    b.add_argument("--devices", default="cpu,gpu", help="the results of these devices only (comma list)")
    b.add_argument("--add", action="store_true",
                   help="add these lanes to the history (same-named lanes replaced) instead of writing it anew")
    s = sub.add_parser("show", help="print findings x releases")
    s.add_argument("--history", default=None, help="a history file (default: every framework's, united)")
    s.add_argument("--findings", action="append", default=[], metavar="PATH", help="a findings file of your own, added to the installed frameworks' knowledge base (repeatable)")
    args = p.parse_args(argv)
    knowledge = sources.load(history=None, extra=args.findings)
    if args.command == "build":
        hist = build(args.results, knowledge, machine_record(), tuple(args.devices.split(",")))
        if args.output:
            _write(Path(args.output), hist, args.add)
        else:
            packages = sources.framework_packages()
            for framework, part in by_framework(hist).items():
                if framework not in packages:
                    raise SystemExit(f"lanes of {framework!r}, which no installed framework package is: "
                                     f"install it, or write them with -o FILE")
                _write(packages[framework] / "history.json", part, args.add)
        print(table(sources.load(history=args.output or sources.FRAMEWORK_HISTORIES, extra=args.findings).history, knowledge))
    else:
        print(table(sources.load(history=args.history or sources.FRAMEWORK_HISTORIES, extra=args.findings).history, knowledge))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""poolgrad's packages form layers: each imports only the layers below it (in functions too),
so no import runs back up and none is hidden inside a function to dodge a cycle. The core (all
but the framework packages) names no framework's kernel library: a framework package supplies
what its environment decides (poolgrad/adapters/framework.py, Dispatch)."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "poolgrad"
# Lowest first: the executable spec, then what runs frameworks and judges their results, the
# catalogue and knowledge base, reports, drafts of upstream reports, the run, and pytest's entry points.
LAYERS = ["json_values", "reference", "adapters", "verdicts", "cases", "reports", "upstream", "suite", "plugin", "cli",
          "conformance"]
# The framework side: the framework packages, and the kernel library module two of them share.
FRAMEWORK_SIDE = ("adapters/torch/", "adapters/tensorflow/", "adapters/jax/", "adapters/keras/", "adapters/onednn.py")
# Kernel libraries' names the core must not use (the frameworks' own names it still has).
LIBRARIES = re.compile(r"onednn|dnnl|mkldnn", re.IGNORECASE)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("poolgrad."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("poolgrad."))
    return found


def test_every_import_goes_down_the_layers():
    upward = []
    for path in PACKAGE.rglob("*.py"):
        layer = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if layer == "__init__":
            continue
        assert layer in LAYERS, f"{path}: add its package to LAYERS"
        upward += [f"{path.relative_to(PACKAGE)} imports poolgrad.{target}" for target in _imports(path)
                   if target != layer and LAYERS.index(target) > LAYERS.index(layer)]
    assert not upward, upward


def test_the_core_names_no_kernel_library():
    named = [f"{rel}:{n}: {line.strip()}" for path in sorted(PACKAGE.rglob("*.py"))
             if not (rel := path.relative_to(PACKAGE).as_posix()).startswith(FRAMEWORK_SIDE)
             for n, line in enumerate(path.read_text().splitlines(), 1) if LIBRARIES.search(line)]
    assert not named, "move it to the framework's package (its Dispatch):\n" + "\n".join(named)

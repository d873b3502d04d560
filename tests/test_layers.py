"""poolgrad's packages form layers: each imports only the layers below it (in functions too),
so no import runs back up and none is hidden inside a function to dodge a cycle. The core (all
but the framework packages) names no framework's kernel library and no plugin framework, comments
included; its code names no framework nor a framework's environment variable: a framework package
declares them in its record (poolgrad/adapters/framework.py: Dispatch, WorkerEnvironment,
Upstream). The built-in frameworks appear in the core's prose only where the spec says where a
rule comes from (poolgrad/reference/). No module is over 400 lines."""

import ast
import re
import tomllib
from pathlib import Path

from poolgrad.adapters import registry

PACKAGE = Path(__file__).parents[1] / "poolgrad"
# Lowest first: the executable spec, then what runs frameworks and judges their results, the
# knowledge base, the catalogue, reports, drafts of upstream reports, the run, and pytest's entry points.
LAYERS = ["json_values", "reference", "adapters", "verdicts", "knowledge", "cases", "reports", "upstream", "suite",
          "plugin", "cli", "conformance"]
# The framework side: the framework packages, and the kernel library module two of them share.
FRAMEWORK_SIDE = ("adapters/torch/", "adapters/tensorflow/", "adapters/jax/", "adapters/keras/", "adapters/onednn.py")
# Where the core may say which built-in framework a rule comes from: the executable spec.
SPEC_SIDE = ("reference/",)
# The list of plugins poolgrad's own distributions register names them all.
PLUGIN_LIST = "adapters/plugins.toml"
# Kernel libraries' names the core must not use, not even in comments.
LIBRARIES = re.compile(r"onednn|dnnl|mkldnn", re.IGNORECASE)
# Every framework poolgrad knows, installed or not: the built-in framework packages, with the
# names people write them by, and the plugins of adapters/plugins.toml; then what the installed
# records add (import names, what their workers import, distributions).
BUILT_IN = {p.removeprefix("adapters/").removesuffix("/") for p in FRAMEWORK_SIDE if p.endswith("/")}
SPELLED = {"pytorch", "tf"}  # how prose names two of them
PLUGINS = set(tomllib.loads((PACKAGE / PLUGIN_LIST).read_text()))
for _fw in registry.FRAMEWORKS.values():
    (BUILT_IN if _fw.name in BUILT_IN else PLUGINS).update(
        {_fw.name, _fw.import_name, *_fw.distributions, *(w.requires for w in _fw.workers.values())})
FRAMEWORK_NAMES = sorted(BUILT_IN | PLUGINS)


def _words(names) -> re.Pattern:
    """``names`` as whole words between anything but letters and digits (JAX_COMPILATION_CACHE_DIR
    names jax, torchinductor no torch)."""
    return re.compile(rf"(?<![a-z0-9])({'|'.join(map(re.escape, sorted(names)))})(?![a-z0-9])", re.IGNORECASE)


NAMED = _words(FRAMEWORK_NAMES)
NAMED_PLUGIN = _words(PLUGINS - BUILT_IN)
NAMED_BUILT_IN = _words(BUILT_IN | SPELLED)
# Frameworks' worker environment variables that name no framework: their records declare them.
FRAMEWORK_VARIABLES = re.compile(r"(?<![A-Za-z0-9])(PYTORCH|TORCHINDUCTOR|TF|XLA)_\w+")


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


def _code_words(tree: ast.AST):
    """(line, word) for every name and string of the code: not its docstrings (nor its comments,
    which the tree leaves out)."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            words = [node.value] if id(node) not in docstrings else []
        else:  # names read, attributes, imports, definitions, arguments and keywords
            words = [getattr(node, field, None) for field in ("id", "attr", "name", "asname", "module", "arg")]
        yield from ((getattr(node, "lineno", 0), w) for w in words if isinstance(w, str))


def _core_files():
    """(path relative to the package, text) of every text file of the core."""
    for path in sorted(PACKAGE.rglob("*")):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.is_file() and "__pycache__" not in rel and not rel.startswith(FRAMEWORK_SIDE):
            try:
                yield rel, path.read_text()
            except UnicodeDecodeError:
                continue


def test_the_core_names_no_framework_or_kernel_library():
    core = list(_core_files())
    lines = [(rel, n, line) for rel, text in core for n, line in enumerate(text.splitlines(), 1)]
    libraries = [f"{rel}:{n}: {line.strip()}" for rel, n, line in lines if LIBRARIES.search(line)]
    assert not libraries, "move it to the framework's package (its Dispatch):\n" + "\n".join(libraries)
    plugins = [f"{rel}:{n}: {line.strip()}" for rel, n, line in lines if rel != PLUGIN_LIST and NAMED_PLUGIN.search(line)]
    assert not plugins, "a plugin framework is named in its own package only:\n" + "\n".join(plugins)
    frameworks = sorted({f"{rel}:{n}: {word!r}" for rel, text in core if rel.endswith(".py")
                         for n, word in _code_words(ast.parse(text))
                         if NAMED.search(word) or FRAMEWORK_VARIABLES.search(word)})
    assert not frameworks, ("declare it in the framework's record (poolgrad/adapters/framework.py), or say it "
                            "without the framework's name:\n" + "\n".join(frameworks))


def test_the_core_says_which_built_in_framework_a_rule_comes_from_only_in_the_spec():
    mentions = sorted(f"{rel}:{n}: {line.strip()}" for rel, text in _core_files() if not rel.startswith(SPEC_SIDE)
                      for n, line in enumerate(text.splitlines(), 1) if NAMED_BUILT_IN.search(line))
    assert not mentions, ("say it without the framework's name (the framework's package, its findings or "
                          "the spec may name it):\n" + "\n".join(mentions))


MAX_LINES = 400


def test_no_module_is_over_400_lines():
    """A module over 400 lines does more than one job: split it along its seams."""
    long = sorted(f"{path.relative_to(PACKAGE)}: {n} lines" for path in PACKAGE.rglob("*.py")
                  if (n := len(path.read_text().splitlines())) > MAX_LINES)
    assert not long, f"over {MAX_LINES} lines, split along its seams (one job a module):\n" + "\n".join(long)

"""House rules of the source tree, checked on the files themselves: packages in one declared order (a package imports
only packages before it), no import cycle between rlvr's modules (imports inside functions included: a lazy import is
still a dependency), no function over 60 lines, no module over 400 lines, and the benchmark harness outside the
product, itself without an import cycle."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
BENCH = SRC.parent / "benchmarks" / "rlvr_bench"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400

# rlvr's top-level packages and modules in the order data moves through them; each may import only those before it.
# Shared records sit early: Problem and the answer forms in tasks, Verdict in verifiers, ConfigError in errors.
ORDER = (
    "errors",
    "yaml_io",
    "machine",
    "registry",
    "presets",
    "config",
    "tasks",
    "prompts",
    "verifiers",
    "environments",
    "algorithms",
    "policy",
    "sampling",
    "rundir",
    "evaluation",
    "training",
    "serve",
    "integrations",
    "cli",
    "__init__",
    "__main__",
)


def modules(package: Path = SRC / "rlvr") -> dict[str, Path]:
    """Dotted module name -> file, for every module under a package's folder, src/rlvr by default (a package is its
    __init__.py)."""
    out = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported(name: str, path: Path, known: dict) -> set[str]:
    """The rlvr modules `name` imports anywhere in its file (top level or inside functions)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x / from .x import y
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            # `from pkg import sub` imports the module pkg.sub when there is one, else names from pkg
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # rlvr.x.y.Name -> rlvr.x.y
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a cycle of imports."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_src():
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert graph["rlvr.training.loop"] >= {"rlvr.training.step", "rlvr.rundir.checkpoint"}  # the parser sees imports
    assert cycles(graph) == []


def test_no_import_cycle_in_the_benchmark_harness():
    """benchmarks/rlvr_bench: the verbs' modules (bench, rollouts, time_to_accuracy) and the workers import the pieces
    they share from below (rlvr_bench.parent, rlvr_bench.child), never one another in a circle."""
    known = modules(BENCH)
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert graph["rlvr_bench.rollouts"] >= {"rlvr_bench.parent", "rlvr_bench.child", "rlvr_bench.engines"}
    assert cycles(graph) == []


def package_of(module: str) -> str:
    """rlvr.tasks.base -> tasks; rlvr.config -> config; rlvr -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_packages_import_only_earlier_packages():
    known = modules()
    assert {package_of(m) for m in known} <= set(ORDER), "a new package: place it in ORDER"
    later = []
    for name, path in known.items():
        here = ORDER.index(package_of(name))
        for target in imported(name, path, known):
            if ORDER.index(package_of(target)) > here:
                later.append(f"{name} imports {target}")
    assert later == []


def test_the_order_check_sees_a_lazy_import_of_a_later_package():
    known = modules()
    graph = imported("rlvr.training.step", known["rlvr.training.step"], known)
    assert "rlvr.evaluation.out_of_domain" in graph  # a package before training: allowed
    assert ORDER.index("training") > ORDER.index("evaluation")


def test_no_module_over_400_lines():
    long = [
        f"{p.relative_to(SRC)}: {n} lines"
        for p in sorted((SRC / "rlvr").rglob("*.py"))
        if (n := p.read_text().count("\n")) > MAX_MODULE_LINES
    ]
    assert long == []


def test_no_function_over_60_lines():
    long = []
    for path in sorted((SRC / "rlvr").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}() is {size} lines")
    assert long == []


def test_the_product_never_imports_the_benchmark_harness_at_module_level():
    """rlvr_bench (benchmarks/) is imported only inside the `bench` verb's functions."""
    for path in (SRC / "rlvr").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not any(n.startswith("rlvr_bench") for n in names), path


def test_package_docstrings_say_what_is_current():
    """Each folder's __init__.py says what goes in and what comes out, now: none says its work is "in progress", and
    environments/ (once "(issue 31, in progress)") names every module it holds."""
    import re

    def doc(path: Path) -> str:
        return ast.get_docstring(ast.parse(path.read_text())) or ""

    stale = [str(p.relative_to(SRC)) for p in sorted((SRC / "rlvr").rglob("__init__.py")) if "in progress" in doc(p)]
    assert stale == []
    env = SRC / "rlvr" / "environments"
    listed = set(re.findall(r"^    (\w+) ", doc(env / "__init__.py"), re.MULTILINE))
    assert listed == {p.stem for p in env.glob("*.py") if p.stem != "__init__"}


def test_the_readme_tree_lists_the_packages_in_this_order():
    """README.md's file tree quotes ORDER (its top-level entries under src/rlvr/, and the one-line list above it), so
    a reader and this test see one order."""
    import re

    text = (SRC.parent / "README.md").read_text()
    files = text[text.index("## Files") :]
    tree = files[files.index("```\nsrc/rlvr/") : files.index("\nbenchmarks/")]
    listed = [m.group(1) for m in re.finditer(r"^  (\w+)", tree, re.MULTILINE)]
    packages = [p for p in ORDER if p not in ("__init__", "__main__")]
    assert listed == packages
    assert f"`{', '.join(packages)}`" in " ".join(files[: files.index("```")].split())

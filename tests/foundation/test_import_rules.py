"""The package's import graph: the core imports no format package, the formats no dataset code.

Every module under ``src/bloomskip`` is parsed with :mod:`ast`, and every import in it counts,
including the lazy ones inside functions, relative imports, and ``importlib.import_module`` /
``__import__`` calls with a constant name. The C module is checked for ``PyImport_*`` calls that
name a format package. A broken rule fails naming the module, the line and the rule.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import bloomskip

PACKAGE_DIR = Path(bloomskip.__file__).resolve().parent

CORE = (
    "bloomskip.hashing",
    "bloomskip.bits",
    "bloomskip._batch",
    "bloomskip.errors",
    "bloomskip._atomic",
    "bloomskip._sql",
    "bloomskip._cli",
    "bloomskip._sources",
    "bloomskip._store",
)
FORMATS = ("bloomskip.tsfile", "bloomskip.clickhouse", "bloomskip.dataset", "bloomskip.parquet")

# (rule, importing modules, forbidden targets): a module matches a name when it is that module
# or inside that package.
RULES = (
    ("the core imports no format package", CORE, FORMATS),
    ("tsfile never imports dataset", ("bloomskip.tsfile",), ("bloomskip.dataset",)),
    ("clickhouse never imports dataset", ("bloomskip.clickhouse",), ("bloomskip.dataset",)),
    ("parquet never imports dataset", ("bloomskip.parquet",), ("bloomskip.dataset",)),
    (
        "pruning uses the shared vocabulary, not the build machinery",
        ("bloomskip.dataset.prune",),
        ("bloomskip.dataset.build",),
    ),
)

HEAVY = ("pyarrow", "duckdb", "sqlglot", "chdb", "pandas", "matplotlib", "polars", "tqdm")


def _within(module: str, names: tuple[str, ...]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in names)


def module_name(path: Path, root: Path) -> str:
    """Return the dotted name of the module at ``path`` in the package whose directory is ``root``.

    Example:
        >>> module_name(Path("pkg/a/b.py"), Path("pkg"))
        'pkg.a.b'
    """
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Return ``(line, imported module)`` for every import in ``source``, lazy ones included.

    ``from a import b`` yields both ``a`` and ``a.b`` (``b`` may be a submodule); relative
    imports are resolved against ``module``.

    Example:
        >>> imports_of("def f():\\n    from .b import c", "pkg.a", False)
        [(2, 'pkg.b'), (2, 'pkg.b.c')]
    """
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((node.lineno, base))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            )
        ):
            found.append((node.lineno, node.args[0].value))
    return sorted(set(found))


def violations(root: Path) -> list[str]:
    """Return one ``module:line: imports target (breaks: rule)`` line per broken rule."""
    broken = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        text = path.read_text(encoding="utf-8")
        reported = set()  # ``from a import b`` yields ``a`` and ``a.b``: one report per line
        for line, target in imports_of(text, module, path.name == "__init__.py"):
            for rule, importers, forbidden in RULES:
                if (
                    _within(module, importers)
                    and _within(target, forbidden)
                    and (line, rule) not in reported
                ):
                    reported.add((line, rule))
                    broken.append(f"{module} ({path.name}:{line}): imports {target} ({rule})")
    # The C module is core too: it may import nothing of a format package.
    c_import = re.compile(r"PyImport_\w+\s*\(\s*\"([\w.]+)\"")
    for path in sorted(root.rglob("*.c")):
        text = path.read_text(encoding="utf-8")
        for match in c_import.finditer(text):
            if _within(match.group(1), FORMATS):
                line = text.count("\n", 0, match.start()) + 1
                broken.append(
                    f"bloomskip._native ({path.name}:{line}): imports {match.group(1)} "
                    "(the core imports no format package)"
                )
    return broken


def test_every_module_parses_and_the_rules_hold():
    modules = list(PACKAGE_DIR.rglob("*.py"))
    assert len(modules) > 20  # the walk found the package, not an empty directory
    broken = violations(PACKAGE_DIR)
    assert not broken, "import rules broken:\n" + "\n".join(broken)


@pytest.mark.parametrize(
    ("relative", "code", "expected"),
    [
        (
            "hashing.py",
            "def f():\n    from bloomskip.tsfile import BloomFilter\n",
            "bloomskip.hashing (hashing.py:2): imports bloomskip.tsfile",
        ),
        (
            "bits.py",
            "from bloomskip import dataset\n",
            "bloomskip.bits (bits.py:1): imports bloomskip.dataset",
        ),
        (
            "_sql.py",
            "import importlib\nimportlib.import_module('bloomskip.clickhouse.ddl')\n",
            "bloomskip._sql (_sql.py:2): imports bloomskip.clickhouse.ddl",
        ),
        (
            "clickhouse/index.py",
            "def f():\n    from ..dataset.index.sidecar import Sidecar\n",
            "bloomskip.clickhouse.index (index.py:2): imports bloomskip.dataset.index.sidecar",
        ),
        (
            "tsfile/__init__.py",
            "from .. import dataset\n",
            "bloomskip.tsfile (__init__.py:1): imports bloomskip.dataset",
        ),
        (
            "dataset/prune.py",
            "def f():\n    from bloomskip.dataset.build.indexing import ROW_GROUP\n",
            "bloomskip.dataset.prune (prune.py:2): imports bloomskip.dataset.build.indexing",
        ),
        (
            "_native_src/hash.c",
            'static void f(void) { PyImport_ImportModule("bloomskip.dataset"); }\n',
            "bloomskip._native (hash.c:1): imports bloomskip.dataset",
        ),
    ],
)
def test_a_broken_rule_is_reported_with_module_and_line(tmp_path, relative, code, expected):
    root = tmp_path / "bloomskip"
    (root / Path(relative).parent).mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / relative).write_text(code)
    found = violations(root)
    assert len(found) == 1, found
    assert any(line.startswith(expected) for line in found), found


def test_allowed_imports_are_not_reported(tmp_path):
    root = tmp_path / "bloomskip"
    (root / "dataset").mkdir(parents=True)
    (root / "__init__.py").write_text("from bloomskip.dataset import Dataset\n")
    (root / "dataset" / "build.py").write_text("from bloomskip.clickhouse.index import SkipIndex\n")
    (root / "dataset" / "prune.py").write_text("from .vocabulary import ROW_GROUP\n")
    (root / "hashing.py").write_text("from bloomskip.errors import FormatError\n")
    assert violations(root) == []


STARTS = {
    "import": "import bloomskip",
    # What ``bloomskip --help`` runs, in this process so its modules can be listed after.
    "help": (
        "import runpy, sys\n"
        "sys.argv = ['bloomskip', '--help']\n"
        "try:\n"
        "    runpy.run_module('bloomskip', run_name='__main__')\n"
        "except SystemExit as exit:\n"
        "    assert exit.code in (0, None), exit.code\n"
    ),
}


@pytest.mark.parametrize("start", sorted(STARTS))
def test_start_up_imports_no_heavy_dependency(start):
    probe = (
        STARTS[start]
        + f"\nprint(sorted(m for m in __import__('sys').modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout


def test_every_exception_class_lives_in_errors_and_is_exported():
    """One errors module: no other module defines an exception, and ``bloomskip`` re-exports all."""
    errors_module = PACKAGE_DIR / "errors.py"
    outside = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path == errors_module:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {ast.unparse(base) for base in node.bases}
                if any(base.endswith(("Error", "Exception")) for base in bases):
                    outside.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno} {node.name}")
    assert outside == []

    from bloomskip import errors

    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    assert defined <= set(bloomskip.__all__)
    assert all(getattr(bloomskip, name) is getattr(errors, name) for name in defined)


MAX_FUNCTION_LINES = 120


def import_cycles(root: Path) -> list[list[str]]:
    """The groups of modules under ``root`` that import each other, directly or not (lazy
    imports included; importing one's own enclosing package does not count), sorted.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp()) / "pkg"
        >>> root.mkdir()
        >>> _ = (root / "__init__.py").write_text("")
        >>> _ = (root / "a.py").write_text("def f():\\n    from pkg import b\\n")
        >>> _ = (root / "b.py").write_text("from pkg.a import f\\n")
        >>> import_cycles(root)
        [['pkg.a', 'pkg.b']]
    """
    paths = {module_name(path, root): path for path in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets = set()
        for _, target in imports_of(
            path.read_text(encoding="utf-8"), module, path.name == "__init__.py"
        ):
            while target and target not in paths:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                targets.add(target)
        graph[module] = targets
    # Tarjan's strongly connected components, iterative: the graph is small but deep.
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in sorted(graph):
        if start in order:
            continue
        work = [(start, iter(sorted(graph[start])))]
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def long_functions(root: Path, limit: int) -> list[str]:
    """``module.function: N lines`` for every function under ``root`` longer than ``limit``
    lines (its ``def`` to its last line, decorators aside)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{module_name(path, root)}.{node.name}: {lines} lines")
    return found


def test_no_import_cycle():
    # The last one went with issue 28: a build worker gets a picklable SegmentWriter instead
    # of rebuilding the user-facing dataset, and the lake dataset no longer imports the
    # sidecar dataset's module for its frame conversions and sidecar path.
    assert import_cycles(PACKAGE_DIR) == []


def test_a_new_import_cycle_is_found(tmp_path):
    root = tmp_path / "bloomskip"
    (root / "dataset").mkdir(parents=True)
    (root / "__init__.py").write_text("from bloomskip.dataset import x\n")
    (root / "dataset" / "__init__.py").write_text("")
    (root / "dataset" / "x.py").write_text("def f():\n    from ..dataset import y\n")
    (root / "dataset" / "y.py").write_text("import bloomskip.dataset.z\n")
    (root / "dataset" / "z.py").write_text("from bloomskip.dataset.x import f\n")
    assert import_cycles(root) == [
        ["bloomskip.dataset.x", "bloomskip.dataset.y", "bloomskip.dataset.z"]
    ]


def test_no_function_is_over_the_limit():
    assert long_functions(PACKAGE_DIR, MAX_FUNCTION_LINES) == []


def test_a_long_function_is_reported(tmp_path):
    root = tmp_path / "bloomskip"
    root.mkdir()
    body = "".join(f"    x{n} = {n}\n" for n in range(MAX_FUNCTION_LINES))
    (root / "long.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}")
    assert long_functions(root, MAX_FUNCTION_LINES) == [
        f"bloomskip.long.long: {MAX_FUNCTION_LINES + 1} lines"
    ]

"""The package's shape, as a newcomer reads it: no circle of imports, no file to scroll through.

The layers and what each may import are import-linter's contracts (pyproject.toml,
run by ``lint-imports`` in .ci/run); these check what the contracts cannot say:
that no import goes in a circle (package ``__init__`` files included), and that no
module, function or folder outgrows what one can read at once.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import grimp

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "nbchat"
SOURCES = (".py", ".js", ".css")
MAX_LINES = 500  # a module, a script part or a stylesheet part
MAX_FUNCTION_LINES = 60  # a function's body, not counting its docstring
MAX_FOLDER_SHARE = 0.20  # of the package's lines, in one folder


def sources() -> list[Path]:
    """The package's own source files (the lab extension's build output is not source)."""
    return sorted(path for path in PACKAGE.rglob("*") if path.suffix in SOURCES
                  and "labextension" not in path.relative_to(PACKAGE).parts)  # fmt: skip


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_import_goes_in_a_circle():
    graph = grimp.build_graph("nbchat", exclude_type_checking_imports=True)
    circles = [sorted(group) for group in _strongly_connected(graph) if len(group) > 1]
    assert circles == [], "modules that import each other, directly or around a circle"


def test_no_module_is_longer_than_one_can_read():
    long = {str(path.relative_to(PACKAGE)): n for path in sources()
            if (n := lines(path)) > MAX_LINES}
    assert long == {}, f"over {MAX_LINES} lines: carve them along their seams"


def test_no_function_is_longer_than_a_screen():
    long = {}
    for path in sources():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                body = _body_lines(node)
                if body > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = body
    assert long == {}, f"functions over {MAX_FUNCTION_LINES} lines"


def test_no_folder_holds_more_than_a_fifth_of_the_package():
    by_folder: Counter[str] = Counter()
    for path in sources():
        by_folder[str(path.parent.relative_to(PACKAGE))] += lines(path)
    total = sum(by_folder.values())
    crowded = {folder: round(n / total, 3) for folder, n in by_folder.items()
               if n > MAX_FOLDER_SHARE * total}  # fmt: skip
    assert crowded == {}


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The function's lines from its ``def`` to its end, less its docstring's."""
    assert node.end_lineno is not None
    total = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        assert first.end_lineno is not None
        total -= first.end_lineno - first.lineno + 1
    return total


def _strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """Tarjan's strongly connected components of the import graph, without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, edges = work[-1]
            for imported in edges:
                if imported not in index:
                    index[imported] = low[imported] = len(index)
                    stack.append(imported)
                    on_stack.add(imported)
                    work.append(
                        (imported, iter(sorted(graph.find_modules_directly_imported_by(imported))))
                    )
                    break
                if imported in on_stack:
                    low[module] = min(low[module], index[imported])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == module:
                            break
                    groups.append(group)
    return groups

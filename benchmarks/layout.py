"""The package's shape in figures: modules per folder, the largest module and function,
import circles, and how many ``dict[str, Any]`` annotations remain.

Run with ``python benchmarks/layout.py`` (needs ``grimp``, installed with the
``dev`` extra). It reads the source; it runs none of it.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

import grimp

SRC = Path(__file__).resolve().parent.parent / "src" / "nbchat"
MODULE_LIMIT = 500
FUNCTION_LIMIT = 50


def modules_per_folder() -> Counter[str]:
    return Counter(str(path.parent.relative_to(SRC.parent)) for path in SRC.rglob("*.py"))


def sizes() -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    modules, functions = [], []
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        where = str(path.relative_to(SRC.parent))
        modules.append((len(text.splitlines()), where))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{where}:{node.name}"))
    return sorted(modules, reverse=True), sorted(functions, reverse=True)


def circles() -> list[list[str]]:
    """Groups of modules that import each other (strongly connected, Tarjan's algorithm)."""
    graph = grimp.build_graph("nbchat")
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == module:
                    break
            # a package's __init__ importing its own modules is no circle worth naming
            if len(group) > 1 and not all(m.startswith(_package(group)) for m in group):
                found.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def _package(group: list[str]) -> str:
    shortest = min(group, key=len)
    return shortest + "." if any(m.startswith(shortest + ".") for m in group) else "\0"


def dict_any() -> int:
    return sum(path.read_text().count("dict[str, Any]") for path in SRC.rglob("*.py"))


def main() -> None:
    folders = modules_per_folder()
    modules, functions = sizes()
    print("modules per folder:", ", ".join(f"{k} {v}" for k, v in sorted(folders.items())))
    print(f"largest module: {modules[0][1]} {modules[0][0]} lines")
    over = ", ".join(f"{w} {n}" for n, w in modules if n > MODULE_LIMIT)
    print(f"modules over {MODULE_LIMIT} lines: {over or 'none'}")
    print(f"largest function: {functions[0][1]} {functions[0][0]} lines")
    long = ", ".join(f"{w} {n}" for n, w in functions if n > FUNCTION_LIMIT)
    print(f"functions over {FUNCTION_LIMIT} lines: {long or 'none'}")
    found = circles()
    print(f"import circles: {len(found)}" + "".join(f"\n  {' <-> '.join(c)}" for c in found))
    print(f"dict[str, Any] annotations: {dict_any()}")


if __name__ == "__main__":
    main()

"""The package's layout, measured on its import graph (ast only: nothing is imported).

Prints one table: modules at the package root, rooms (root modules and top-level
packages), arrows between rooms, runtime import circles between modules and between
rooms, private modules reached from another package, and function and module sizes.
A runtime import is one the interpreter executes, when the module loads or inside a
function; an import under ``if TYPE_CHECKING:`` is type-only. Circles through type-only
imports are counted apart (they are not circles the interpreter trips on).

Run: ``python benchmarks/layout.py [PACKAGE_DIR]`` (default: ``agentkit/`` beside this
folder). ``tests/test_layout.py`` holds the limits this prints against.
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

EXCLUDE = ("demo_project",)


@dataclass
class Module:
    """One module of the package: its dotted name, file, imports and function sizes."""

    name: str
    path: Path
    is_package: bool
    lines: int
    runtime_imports: set[str] = field(default_factory=set)
    deferred_imports: set[str] = field(default_factory=set)
    typeonly_imports: set[str] = field(default_factory=set)
    functions: list[tuple[str, int]] = field(default_factory=list)


def _module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(importer: Module, node: ast.ImportFrom | ast.Import, names: set[str]) -> list[str]:
    """The package modules one import statement loads (``from x import y`` may be a module)."""
    found: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            for i in range(len(parts), 0, -1):
                if ".".join(parts[:i]) in names:
                    found.append(".".join(parts[:i]))
                    break
        return found
    base_parts = importer.name.split(".")
    if node.level:
        # A package's own name counts as its first level; a module's parent is one up.
        keep = len(base_parts) - node.level + (1 if importer.is_package else 0)
        base = ".".join(base_parts[:keep] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        if candidate in names:
            found.append(candidate)
        elif base in names:
            found.append(base)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_imports(mod: Module, tree: ast.Module, names: set[str]) -> None:
    sets = {
        "load": mod.runtime_imports,
        "deferred": mod.deferred_imports,
        "type": mod.typeonly_imports,
    }

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                sets[kind].update(t for t in _resolve(mod, child, names) if t != mod.name)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.body:
                    visit(ast.Module(body=[sub], type_ignores=[]), "type")
                for sub in child.orelse:
                    visit(ast.Module(body=[sub], type_ignores=[]), kind)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, "type" if kind == "type" else "deferred")
            else:
                visit(child, kind)

    visit(tree, "load")


def _functions(tree: ast.Module) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.lineno
            out.append((node.name, end - node.lineno + 1))
    return out


def load(root: Path) -> dict[str, Module]:
    """Every module under ``root`` (a package folder), keyed by dotted name."""
    paths = [p for p in sorted(root.rglob("*.py")) if not any(x in p.parts for x in EXCLUDE)]
    mods = {
        _module_name(root, p): Module(
            _module_name(root, p),
            p,
            p.name == "__init__.py",
            len(p.read_text(encoding="utf-8").splitlines()),
        )
        for p in paths
    }
    names = set(mods)
    for mod in mods.values():
        tree = ast.parse(mod.path.read_text(encoding="utf-8"))
        _walk_imports(mod, tree, names)
        mod.functions = _functions(tree)
    return mods


def room(name: str) -> str:
    """The room a module lives in: ``agentkit.x`` for a root module or top-level package."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else name


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _package_of(name: str, mods: dict[str, Module]) -> str:
    return name if mods[name].is_package else name.rsplit(".", 1)[0]


def private_reaches(mods: dict[str, Module]) -> list[tuple[str, str]]:
    """(importer, private module) pairs where the importer is outside the module's package."""
    out = []
    for mod in mods.values():
        for target in mod.runtime_imports | mod.deferred_imports | mod.typeonly_imports:
            leaf = target.rsplit(".", 1)[-1]
            if not leaf.startswith("_") or leaf.startswith("__"):
                continue
            owner = target.rsplit(".", 1)[0]
            if not _package_of(mod.name, mods).startswith(owner):
                out.append((mod.name, target))
    return sorted(out)


@dataclass
class Figures:
    """The layout's figures, as ``tests/test_layout.py`` checks them."""

    root_modules: int
    rooms: int
    room_arrows: int
    module_circles: list[list[str]]
    room_circles: list[list[str]]
    typeonly_module_circles: int
    private_reaches: list[tuple[str, str]]
    functions_over_60: list[tuple[str, str, int]]
    functions_over_100: list[tuple[str, str, int]]
    modules_over_400: list[tuple[str, int]]
    modules: int
    lines: int


def measure(root: Path) -> Figures:
    """The figures for the package folder ``root``."""
    mods = load(root)
    top = root.name
    root_modules = [m for m in mods.values() if m.name.count(".") == 1 and not m.is_package]
    rooms = {room(n) for n in mods if n != top}
    runtime = {n: m.runtime_imports | m.deferred_imports for n, m in mods.items()}
    everything = {n: runtime[n] | m.typeonly_imports for n, m in mods.items()}
    room_graph: dict[str, set[str]] = {}
    for name, targets in runtime.items():
        if name == top:
            continue
        for t in targets:
            if t != top and room(t) != room(name):
                room_graph.setdefault(room(name), set()).add(room(t))
    arrows = {
        (room(n), room(t))
        for n, ts in everything.items()
        for t in ts
        if n != top and t != top and room(n) != room(t)
    }
    all_circles = circles(everything)
    runtime_circles = circles(runtime)
    funcs = [(m.name, f, n) for m in mods.values() for f, n in m.functions]
    return Figures(
        root_modules=len(root_modules),
        rooms=len(rooms),
        room_arrows=len(arrows),
        module_circles=runtime_circles,
        room_circles=circles(room_graph),
        typeonly_module_circles=len(all_circles) - len(runtime_circles),
        private_reaches=private_reaches(mods),
        functions_over_60=sorted(f for f in funcs if f[2] > 60),
        functions_over_100=sorted(f for f in funcs if f[2] > 100),
        modules_over_400=sorted((m.name, m.lines) for m in mods.values() if m.lines > 400),
        modules=len(mods),
        lines=sum(m.lines for m in mods.values()),
    )


def main(argv: list[str]) -> None:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / "agentkit"
    f = measure(root)
    rows = [
        ("modules (lines)", f"{f.modules} ({f.lines})"),
        ("modules directly in the package root", f.root_modules),
        ("rooms (root modules + top-level packages)", f.rooms),
        ("arrows between rooms (any import)", f.room_arrows),
        ("runtime circles between modules", len(f.module_circles)),
        ("runtime circles between rooms", len(f.room_circles)),
        ("further circles through type-only imports", f.typeonly_module_circles),
        ("private modules imported from another package", len(f.private_reaches)),
        ("functions over 60 lines", len(f.functions_over_60)),
        ("functions over 100 lines", len(f.functions_over_100)),
        ("modules over 400 lines", len(f.modules_over_400)),
    ]
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    for title, items in [
        ("module circles", f.module_circles),
        ("room circles", f.room_circles),
        ("private reaches", f.private_reaches),
        ("functions over 60 lines", f.functions_over_60),
        ("modules over 400 lines", f.modules_over_400),
    ]:
        if items:
            print(f"\n{title}:")
            for item in items:
                print("  ", item)


if __name__ == "__main__":
    main(sys.argv)

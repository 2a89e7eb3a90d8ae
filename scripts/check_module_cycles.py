#!/usr/bin/env python3
"""Fails when a module imports, directly or through others, a module that imports it: the
dependencies must point one way, along the data flow (README, Layout). These graphs are checked:
the engine crate's modules (`crate::<module>` in crates/mqttlab-engine/src), the files inside each
of its module folders (smc/, pacing/: `super::<file>`, a name of mod.rs through `super::`), every file of the
Python package (every `import` in python/mqttlab, those inside functions too: an import made late
to dodge a circle is still a circle; the package root counts as a module, so `from mqttlab import
__version__` inside the package is an edge to the root, which imports the session; importing a
file of another package runs that package's __init__ first, so it is an edge to the package too),
and the Python
packages of LAYERED as wholes (analysis below reports below reproductions: no file of a lower one
imports a higher one). Any cycle in any of them fails; each is printed (Tarjan's strongly
connected components).

Usage: scripts/check_module_cycles.py"""

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERED = ("mqttlab.analysis", "mqttlab.reports", "mqttlab.reproductions")


def rust_dependencies(src: Path) -> dict[str, list[str]]:
    """Module -> the crate modules it names as `crate::<module>`; a directory module is one."""
    texts = {p.stem: p.read_text() for p in src.glob("*.rs") if p.stem != "lib"}
    for d in (p for p in src.iterdir() if p.is_dir()):
        texts[d.name] = "".join(f.read_text() for f in d.rglob("*.rs"))
    return {m: sorted({d for d in re.findall(r"crate::(\w+)", t) if d in texts and d != m}) for m, t in texts.items()}


def rust_folder_dependencies(folder: Path) -> dict[str, list[str]]:
    """File of a module folder -> the files of the same folder it names: `super::<file>` (or a
    name mod.rs defines, `super::<name>`, which is `mod`), `crate::<folder>::<file>`, and in
    mod.rs `<file>::`. mod.rs is the node `mod`; its `mod <file>;` lines declare, they do not
    depend, as lib.rs's do not. A file's test module (at its end) is left out: its `super` is the
    file itself."""
    texts = {p.stem: p.read_text().split("#[cfg(test)]\nmod tests")[0] for p in folder.glob("*.rs")}
    graph: dict[str, list[str]] = {}
    for name, text in texts.items():
        text = re.sub(r"^\s*(pub(\([\w:]+\))?\s+)?mod\s+\w+\s*;", "", text, flags=re.M)
        named = re.findall(r"super::(\w+)", text) + re.findall(rf"crate::{folder.name}::(\w+)", text)
        named += [item.strip().split("::")[0] for group in re.findall(r"super::\{([^}]*)\}", text) for item in group.split(",")]
        if name == "mod":
            named += re.findall(r"(?<![\w:])(\w+)::", text)
        found = {n if n in texts else "mod" for n in named if n} if name != "mod" else {n for n in named if n in texts}
        graph[name] = sorted(found - {name})
    return graph


def rust_folders(src: Path) -> list[Path]:
    """Every module folder of the crate (those inside others too)."""
    return sorted(p for p in src.rglob("*") if p.is_dir())


def python_dependencies(package: Path) -> dict[str, list[str]]:
    """File module (`mqttlab.reports.html`) -> the package's file modules it imports. `from a.b
    import c` names the module a.b.c when that is a file, else a.b; a package's __init__ counts
    as the module of its name, and an import of a.b.c is an edge to the package a.b as well
    (Python runs a/b/__init__.py to import it), unless the importer is inside a.b itself."""
    root = package.parent
    modules = {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p for p in package.rglob("*.py")}
    # A compiled module (mqttlab._engine, its stub beside it) imports nothing of the package.
    compiled = {".".join(p.relative_to(root).with_suffix("").parts) for p in package.rglob("*.pyi")}
    graph: dict[str, list[str]] = {name: [] for name in compiled - set(modules)}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's own package upwards
                    parts = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join([*parts, base] if base else parts)
                found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules or f"{base}.{alias.name}" in graph else base
                             for alias in node.names)
        found |= {package for module in found for package in _enclosing(module) if package in modules and not _inside(name, package, is_package)}
        graph[name] = sorted(d for d in found if (d in modules or d in compiled) and d != name)
    return graph


def _enclosing(module: str) -> list[str]:
    """The packages whose __init__ importing `module` runs: a.b.c -> a, a.b."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _inside(module: str, package: str, is_package: bool) -> bool:
    """Whether `module` (a package's __init__ when `is_package`) is `package` or within it: its
    own package's __init__ has run before it, so importing through it is no new edge."""
    own = module if is_package else module.rpartition(".")[0]
    return own == package or own.startswith(package + ".")


def package_dependencies(graph: dict[str, list[str]], packages: tuple[str, ...]) -> dict[str, list[str]]:
    """Package -> the packages of `packages` its files import (its own files' imports of each other left out)."""
    def package(module: str) -> str | None:
        return next((p for p in packages if module == p or module.startswith(p + ".")), None)

    out: dict[str, set[str]] = {p: set() for p in packages}
    for module, imports in graph.items():
        mine = package(module)
        if mine is not None:
            out[mine].update(q for q in map(package, imports) if q is not None and q != mine)
    return {p: sorted(q) for p, q in out.items()}


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
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
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def main() -> int:
    python = python_dependencies(ROOT / "python/mqttlab")
    failed = False
    for label, graph in (
        ("crates/mqttlab-engine/src", rust_dependencies(ROOT / "crates/mqttlab-engine/src")),
        *((str(f.relative_to(ROOT)), rust_folder_dependencies(f)) for f in rust_folders(ROOT / "crates/mqttlab-engine/src")),
        ("python/mqttlab", python),
        ("python packages " + " < ".join(LAYERED), package_dependencies(python, LAYERED)),
    ):
        found = cycles(graph)
        for c in found:
            print(f"{label}: import cycle among {len(c)} modules: {', '.join(c)}", file=sys.stderr)
        if not found:
            print(f"{label}: {len(graph)} modules, no import cycle")
        failed |= bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

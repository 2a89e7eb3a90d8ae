#!/usr/bin/env python3
"""Fails when a module of the engine crate imports, directly or through others, a module that
imports it: the engine's dependencies must point one way, along its data flow (README, Layout).
Prints each module's dependencies and every cycle found (Tarjan's strongly connected components).

Usage: scripts/check_module_cycles.py [crates/mqttlab-engine/src]"""

import re
import sys
from pathlib import Path


def dependencies(src: Path) -> dict[str, list[str]]:
    """Module -> the crate modules it names as `crate::<module>`; a directory module is one."""
    texts = {p.stem: p.read_text() for p in src.glob("*.rs") if p.stem != "lib"}
    for d in (p for p in src.iterdir() if p.is_dir()):
        texts[d.name] = "".join(f.read_text() for f in d.rglob("*.rs"))
    return {m: sorted({d for d in re.findall(r"crate::(\w+)", t) if d in texts and d != m}) for m, t in texts.items()}


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

    for v in graph:
        if v not in index:
            visit(v)
    return found


def main() -> int:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "crates/mqttlab-engine/src")
    graph = dependencies(src)
    found = cycles(graph)
    for c in found:
        print(f"import cycle among {len(c)} modules: {', '.join(c)}", file=sys.stderr)
    if not found:
        print(f"{src}: {len(graph)} modules, no import cycle")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

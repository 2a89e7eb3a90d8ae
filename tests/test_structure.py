"""The engine's modules depend on each other one way only (README, Layout): the check that CI
runs finds no import cycle in the engine, and does find one when a module imports back."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _checker():
    spec = importlib.util.spec_from_file_location("check_module_cycles", ROOT / "scripts" / "check_module_cycles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_engine_has_no_import_cycle():
    checker = _checker()
    graph = checker.dependencies(ROOT / "crates" / "mqttlab-engine" / "src")
    assert {"plan", "validate", "context", "sending", "client", "sn_client", "worker", "run"} <= set(graph)
    assert checker.cycles(graph) == []
    # The plan is plain data: it depends on no part of the engine that runs it.
    assert set(graph["plan"]) <= {"template"}


def test_a_module_importing_back_is_a_cycle(tmp_path):
    (tmp_path / "plan.rs").write_text("use crate::client::Thing;\n")
    (tmp_path / "client.rs").write_text("use crate::context::Ctx;\n")
    (tmp_path / "context.rs").write_text("use crate::plan::RunPlan;\n")
    (tmp_path / "topic.rs").write_text("// a leaf\n")
    checker = _checker()
    assert checker.cycles(checker.dependencies(tmp_path)) == [["client", "context", "plan"]]

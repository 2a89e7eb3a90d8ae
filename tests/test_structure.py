"""The engine's modules and the Python package's files depend on each other one way only (README,
Layout): the check that CI runs finds no import cycle in either, and does find one when a module
imports back."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def checker():
    """scripts/check_module_cycles.py, the check CI runs, loaded as a module."""
    spec = importlib.util.spec_from_file_location("check_module_cycles", ROOT / "scripts" / "check_module_cycles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_engine_has_no_import_cycle(checker):
    graph = checker.rust_dependencies(ROOT / "crates" / "mqttlab-engine" / "src")
    assert {"plan", "validate", "context", "sending", "client", "sn_client", "worker", "run"} <= set(graph)
    assert checker.cycles(graph) == []
    # The plan is plain data: it depends on no part of the engine that runs it.
    assert set(graph["plan"]) <= {"template"}


def test_a_module_importing_back_is_a_cycle(tmp_path, checker):
    (tmp_path / "plan.rs").write_text("use crate::client::Thing;\n")
    (tmp_path / "client.rs").write_text("use crate::context::Ctx;\n")
    (tmp_path / "context.rs").write_text("use crate::plan::RunPlan;\n")
    (tmp_path / "topic.rs").write_text("// a leaf\n")
    assert checker.cycles(checker.rust_dependencies(tmp_path)) == [["client", "context", "plan"]]


def test_the_files_inside_each_engine_module_folder_have_no_import_cycle(checker):
    folders = checker.rust_folders(ROOT / "crates" / "mqttlab-engine" / "src")
    assert {f.name for f in folders} >= {"smc", "pacing"}
    for folder in folders:
        assert checker.cycles(checker.rust_folder_dependencies(folder)) == [], folder.name


def test_a_file_of_a_module_folder_importing_back_is_a_cycle_but_its_tests_are_not(tmp_path, checker):
    (tmp_path / "mod.rs").write_text("pub mod config;\npub mod explore;\npub use config::Config;\npub fn start() { explore::run(); }\n")
    (tmp_path / "config.rs").write_text("pub struct Config;\n")
    (tmp_path / "explore.rs").write_text("use super::config::Config;\nuse super::profile::after;\n")
    (tmp_path / "profile.rs").write_text("use super::{explore::Row, config::Config};\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n")
    graph = checker.rust_folder_dependencies(tmp_path)
    assert graph == {"mod": ["config", "explore"], "config": [], "explore": ["config", "profile"], "profile": ["config", "explore"]}
    assert checker.cycles(graph) == [["explore", "profile"]]


def test_the_python_package_has_no_import_cycle(checker):
    graph = checker.python_dependencies(ROOT / "python" / "mqttlab")
    assert {"mqttlab", "mqttlab.session", "mqttlab.cli.app", "mqttlab.brokers.base"} <= set(graph)
    assert checker.cycles(graph) == []
    assert checker.main() == 0


def test_a_python_import_back_is_a_cycle_also_late_and_through_the_package_root(tmp_path, checker):
    package = tmp_path / "pkg"
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("def __getattr__(name):\n    from pkg import session\n    return session\n")
    (package / "session.py").write_text("from pkg import __version__\n")
    (package / "cli" / "__init__.py").write_text("")
    (package / "cli" / "app.py").write_text("def register():\n    from pkg.cli import run\n")
    (package / "cli" / "run.py").write_text("from .app import register\n")
    (package / "leaf.py").write_text("import os\n")
    assert checker.cycles(checker.python_dependencies(package)) == [["pkg", "pkg.session"], ["pkg.cli.app", "pkg.cli.run"]]


def test_importing_a_file_of_another_package_runs_its_init_so_a_loop_through_it_is_a_cycle(tmp_path, checker):
    # The loop the check once missed: the engine imports scenario.model (which runs scenario's
    # __init__, which imports the rules), and the rules import the engine back, late.
    package = tmp_path / "pkg"
    (package / "scenario").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "scenario" / "__init__.py").write_text("from pkg.scenario.rules import check\n")
    (package / "scenario" / "model.py").write_text("class Scenario: ...\n")
    (package / "scenario" / "rules.py").write_text("from pkg.scenario.model import Scenario\n\ndef check():\n    from pkg.engine import compile\n")
    (package / "engine.py").write_text("from pkg.scenario.model import Scenario\n")
    graph = checker.python_dependencies(package)
    assert "pkg.scenario" in graph["pkg.engine"]  # the package's __init__, not only the file
    assert "pkg.scenario" not in graph["pkg.scenario.rules"]  # its own package's __init__ has run already
    assert checker.cycles(graph) == [["pkg.engine", "pkg.scenario", "pkg.scenario.rules"]]
    (package / "scenario" / "rules.py").write_text("from pkg.scenario.model import Scenario\n")
    assert checker.cycles(checker.python_dependencies(package)) == []


# --- the command's start ------------------------------------------------------------------------

# What a command that only prints (its version, its help) must not import: the run path, the
# analysis stack and TLS. Each of these costs tens to hundreds of ms at every start. (Pydantic is
# not in the list: typer itself imports it to read a command's parameters.)
HEAVY = ("numpy", "pandas", "scipy", "cryptography", "psutil", "yaml", "pydantic", "mqttlab._engine", "mqttlab.scenario",
         "mqttlab.engine", "mqttlab.session", "mqttlab.suite", "mqttlab.brokers", "mqttlab.results")


# What a run against a broker given by URL printing --json must not import: the launchers' parts
# (processes, readiness probes, TLS material, containers, each broker's launcher), the display and
# the analysis stack. The scenario models, the engine and the resource sampler it does need.
NOT_FOR_A_URL_RUN = ("rich", "ssl", "cryptography", "numpy", "pandas", "scipy", "statsmodels", "plotly", "mqttlab.analysis",
                     "mqttlab.reports", "mqttlab.summary_view", "mqttlab.live.view", "mqttlab.tls", "mqttlab.brokers.process",
                     "mqttlab.brokers.probe", "mqttlab.brokers.container", "mqttlab.brokers.mosquitto", "mqttlab.brokers.rumqttd",
                     "mqttlab.cli.brokers", "mqttlab.cli.compare", "mqttlab.cli.suite", "mqttlab.cli.smc", "mqttlab.cli.capacity")


def _imported_by(*arguments: str, exit_codes: tuple[int, ...] = (0,)) -> set[str]:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "mqttlab", *arguments], capture_output=True, text=True, timeout=60)
    assert done.returncode in exit_codes, done.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:") and "|" in line}


def _among(imported: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in imported if any(m == name or m.startswith(name + ".") for name in names))


def test_version_and_help_import_nothing_of_the_run_path():
    for arguments in (["--version"], ["--help"], ["run", "--help"], ["suite", "--help"], ["brokers", "--help"]):
        imported = _imported_by(*arguments)
        assert "typer" in imported  # the parse of importtime's output found the modules
        heavy = _among(imported, HEAVY)
        assert heavy == [], f"mqttlab {' '.join(arguments)} imports {heavy}"


def test_version_imports_no_command_module():
    imported = _imported_by("--version")
    assert "mqttlab.cli.app" in imported
    assert _among(imported, ("mqttlab.cli.run", "mqttlab.cli.brokers", "mqttlab.cli.compare", "rich")) == []


def test_a_run_against_a_broker_given_by_url_imports_no_launcher_display_or_analysis(tmp_path):
    from mqttlab.brokers import get_launcher

    launcher = get_launcher("mosquitto")
    if not launcher.availability().available:
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")
    with launcher.start(tmp_path / "broker") as broker:
        imported = _imported_by("run", "--broker", broker.url(), "--pubs", "1", "--subs", "1", "--messages", "10", "--json",
                                "--out", str(tmp_path / "run"), exit_codes=(0, 1))
    assert {"mqttlab.session", "mqttlab.scenario", "mqttlab._engine", "mqttlab.brokers.external"} <= imported
    assert _among(imported, NOT_FOR_A_URL_RUN) == []


def test_the_version_is_the_same_in_python_pyproject_and_cargo():
    import re
    import tomllib

    from mqttlab import __version__

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    cargo = re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M)
    assert cargo is not None
    assert __version__ == pyproject == cargo[1]

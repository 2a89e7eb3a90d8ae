"""The `mqttlab` command: names each command and the module that holds it."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from importlib import import_module
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

from mqttlab._version import VERSION

# Each command lives in its own module as a plain function (or a group as a typer.Typer) and is
# named here, the one place that imports them: a command module importing `app` back would be an
# import circle. A module is imported when one of its commands is used or its help shown, so that
# `mqttlab --version` imports none of them and `mqttlab run` only its own. (The order is the
# order of `mqttlab --help`.)
COMMANDS = {
    "run": ("mqttlab.cli.run", "run_command"),
    "report": ("mqttlab.cli.run", "report_command"),
    "compare": ("mqttlab.cli.compare", "compare_command"),
    "capacity": ("mqttlab.cli.capacity", "capacity_command"),
    "storm": ("mqttlab.cli.capacity", "storm_command"),
    "standard": ("mqttlab.cli.capacity", "standard_command"),
    "scenario": ("mqttlab.cli.run", "scenario_app"),
    "brokers": ("mqttlab.cli.brokers", "app"),
    "smc": ("mqttlab.cli.smc", "app"),
    "suite": ("mqttlab.cli.suite", "app"),
}


def _click_command(name: str, target: Any) -> Any:
    """The click command typer makes of a command function or a group's typer.Typer."""
    if isinstance(target, typer.Typer):
        command: Any = typer.main.get_group(target)
    else:
        single = typer.Typer(add_completion=False, rich_markup_mode=None)
        single.command(name)(target)
        command = typer.main.get_command(single)
    command.name = name
    return command


class _Commands(MutableMapping[str, Any]):
    """The commands of COMMANDS by name, each made on first use."""

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._made:
            module, attribute = COMMANDS[name]
            self._made[name] = _click_command(name, getattr(import_module(module), attribute))
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)

    def __setitem__(self, name: str, command: Any) -> None:
        raise TypeError(f"mqttlab's commands are named in mqttlab.cli.app.COMMANDS, not added ({name})")

    def __delitem__(self, name: str) -> None:
        raise TypeError(f"mqttlab's commands are named in mqttlab.cli.app.COMMANDS ({name})")


class _LazyGroup(TyperGroup):
    """The root group, its commands made on first use (_Commands)."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.commands = _Commands()


app = typer.Typer(
    name="mqttlab",
    cls=_LazyGroup,
    help="A laboratory for the performance of MQTT brokers.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"mqttlab {VERSION}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
) -> None:
    """A laboratory for the performance of MQTT brokers."""


def main() -> None:
    app()

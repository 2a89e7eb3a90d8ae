"""The `mqttlab` command: registers each command group's module."""

from __future__ import annotations

import typer

from mqttlab import __version__

app = typer.Typer(
    name="mqttlab",
    help="A laboratory for the performance of MQTT brokers.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"mqttlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
) -> None:
    """A laboratory for the performance of MQTT brokers."""


def _register() -> None:
    # Each command group lives in its own module and registers itself here.
    from mqttlab.cli import run as run_cmd  # noqa: F401  (registers `run`, `report`, `scenario`)
    from mqttlab.cli import brokers as brokers_cmd

    app.add_typer(brokers_cmd.app, name="brokers")
    from mqttlab.cli import smc as smc_cmd

    app.add_typer(smc_cmd.app, name="smc")
    from mqttlab.cli import suite as suite_cmd
    from mqttlab.cli import compare as compare_cmd  # noqa: F401  (registers `compare`)
    from mqttlab.cli import capacity as capacity_cmd  # noqa: F401  (registers `capacity`)

    app.add_typer(suite_cmd.app, name="suite")


def main() -> None:
    _register()
    app()

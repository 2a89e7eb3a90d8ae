"""The `mqttlab` command: registers each command group's module."""

from __future__ import annotations

import typer

from mqttlab._version import VERSION

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
        typer.echo(f"mqttlab {VERSION}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
) -> None:
    """A laboratory for the performance of MQTT brokers."""


def _register() -> None:
    # Each command lives in its own module as a plain function and is registered here, the one
    # place that imports them: a command module importing `app` back would be an import circle.
    # (The order is the order of `mqttlab --help`.)
    from mqttlab.cli import brokers, capacity, compare, run, smc, suite

    if app.registered_commands:  # the tests register once per module that drives the CLI
        return
    app.command("run")(run.run_command)
    app.command("report")(run.report_command)
    app.add_typer(run.scenario_app, name="scenario")
    app.add_typer(brokers.app, name="brokers")
    app.add_typer(smc.app, name="smc")
    app.command("compare")(compare.compare_command)
    app.command("capacity")(capacity.capacity_command)
    app.command("storm")(capacity.storm_command)
    app.command("standard")(capacity.standard_command)
    app.add_typer(suite.app, name="suite")


def main() -> None:
    _register()
    app()

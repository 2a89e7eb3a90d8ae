"""`mqttlab brokers list | install | start | stop`: the brokers mqttlab can launch.

`start` runs a broker in the foreground until Ctrl-C; with `--detach` it leaves it running and
records it in ~/.cache/mqttlab/brokers/NAME.json so that `stop` can end it later."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from mqttlab.exits import Exit

# The launchers (and through them TLS and process handling) are imported by the commands that use
# them: `mqttlab --help` needs none of it.
if TYPE_CHECKING:
    from mqttlab.brokers import RunningBroker

BAD_INPUT = Exit.BAD_INPUT
CANNOT_START = Exit.UNREACHABLE

app = typer.Typer(
    help="List, install, start and stop the brokers mqttlab can test.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)


def state_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mqttlab" / "brokers"


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _launcher(name: str) -> Any:
    from mqttlab.brokers import GATEWAY_NAMES, UnknownBroker, get_gateway, get_launcher

    if name in GATEWAY_NAMES:
        return get_gateway(name)
    try:
        return get_launcher(name)
    except UnknownBroker as error:
        raise _fail(str(error), BAD_INPUT) from None


def _describe(broker: RunningBroker) -> str:
    lines = [f"{broker.name} ({broker.version or 'version unknown'}) PID {broker.pid}", f"  {broker.url()}"]
    if broker.v5_port:
        lines.append(f"  mqtt://{broker.host}:{broker.v5_port}  (MQTT 5)")
    if broker.tls_port:
        lines.append(f"  {broker.url(tls=True)}  CA: {broker.ca_file}")
    if broker.log_file:
        lines.append(f"  log: {broker.log_file}")
    if broker.pid:  # a run given the URL alone cannot sample the broker's CPU and memory
        lines.append(f"  measure it with its resources: mqttlab run --broker '{broker.url()}?pid={broker.pid}'")
    return "\n".join(lines)


@app.command("list")
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """Which brokers are available here and why not, versions, install routes and their cost,
    MQTT versions, TLS, and whether the test command tests each one."""
    from rich.table import Table

    from mqttlab.brokers import GATEWAYS, get_gateway, get_launcher, launcher_names

    brokers = [_row(name, get_launcher(name)) for name in launcher_names()]
    # Gateways are not brokers: they are listed apart, with the setting that puts one in front of a broker.
    gateways = [{**_row(name, get_gateway(name)), "used_as": f"transport.gateway: {setting}"} for name, setting in GATEWAYS.items()]
    if as_json:
        typer.echo(json.dumps({"brokers": brokers, "gateways": gateways}, indent=2))
        return
    console = Console(width=200)
    for title, rows in (("Brokers", brokers), ("MQTT-SN gateways (in front of a broker: transport.gateway, docs/mqtt-sn.md)", gateways)):
        table = Table(title=title)
        for column in ("name", "available", "version", "MQTT", "TLS", "WebSocket", "tested", "comes from (install time)", "how to get it / why not"):
            table.add_column(column)
        for row in rows:
            table.add_row(*_cells(row))
        console.print(table)


def _row(name: str, launcher: Any) -> dict[str, Any]:
    """One broker's (or gateway's) entry of `brokers list --json`."""
    found = launcher.availability()
    return {
        "name": name,
        "available": found.available,
        "version": found.version,
        "detail": found.detail,
        "source": launcher.source,
        "install_time": launcher.install_time,
        "mqtt_versions": list(launcher.mqtt_versions),
        "tls": launcher.has_tls,
        "websocket": getattr(launcher, "has_websocket", False),
        "tested_by_test_command": launcher.tested_by_test_command,
        "config_modes": ["tuned", "as-shipped"] + (["file"] if launcher.accepts_config_file else []),
        "versions": list(launcher.versions),
        "persistence": _persistence(launcher),
    }


def _persistence(launcher: Any) -> dict[str, Any] | None:
    """What `launch.persistence: true` applies, with why; or why this broker cannot have it;
    None for a gateway (not a broker)."""
    settings = getattr(launcher, "persistence_on_settings", None)
    if settings is None:
        return None
    if not settings:
        return {"refused": launcher.persistence_refusal}
    return {"settings": [{"setting": setting, "why": why} for setting, why in settings]}


def _cells(row: dict[str, Any]) -> tuple[str, ...]:
    """The table's cells of one entry."""
    if row["name"] == "external":
        return ("external", "by URL", "-", "any", "yes", "yes", "yes", "a broker you run", row["detail"])
    source = row["source"] + (f" ({row['install_time']})" if row["install_time"] else "")
    return (
        row["name"],
        "yes" if row["available"] else "no",
        row["version"] or "-",
        ", ".join(row["mqtt_versions"]) if row["source"] != "none reachable here" else "-",
        "yes" if row["tls"] else "no",
        "yes" if row["websocket"] else "no",
        "yes" if row["tested_by_test_command"] else "no",
        source,
        "" if row["available"] else row["detail"],
    )


@app.command("install")
def install_command(
    names: Annotated[
        list[str], typer.Argument(help="Brokers to install (see `mqttlab brokers list`).", show_default=False)
    ],
) -> None:
    """Install brokers from their registries (idempotent)."""
    from mqttlab.brokers import BrokerError

    launchers = [_launcher(name) for name in names]
    failed = False
    for launcher in launchers:
        typer.echo(f"installing {launcher.name} ...")
        try:
            launcher.install()
        except BrokerError as error:
            typer.echo(f"error: {launcher.name}: {error}", err=True)
            failed = True
            continue
        typer.echo(f"{launcher.name}: {launcher.availability().version or 'installed'}")
    if failed:
        raise typer.Exit(1)


def _record(broker: RunningBroker, workdir: Path) -> Path:
    state = state_dir()
    state.mkdir(parents=True, exist_ok=True)
    path = state / f"{broker.name}.json"
    import psutil

    created = psutil.Process(broker.pid).create_time() if broker.pid else None
    path.write_text(json.dumps({
        "name": broker.name,
        "version": broker.version,
        "pid": broker.pid,
        # With the start time a recycled PID is never mistaken for the broker.
        "pid_create_time": created,
        "host": broker.host,
        "port": broker.port,
        "tls_port": broker.tls_port,
        "v5_port": broker.v5_port,
        "ca_file": str(broker.ca_file) if broker.ca_file else None,
        "log_file": str(broker.log_file) if broker.log_file else None,
        "workdir": str(workdir),
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }, indent=2))
    return path


def _recorded_pid_alive(record: dict[str, Any]) -> bool:
    pid = record.get("pid")
    if not isinstance(pid, int):
        return False
    import psutil

    try:
        process = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return False
    created = record.get("pid_create_time")
    return created is None or abs(process.create_time() - created) < 1.0


@app.command("start")
def start_command(
    name: Annotated[str, typer.Argument(help="Broker name (see `mqttlab brokers list`).", show_default=False)],
    tls: Annotated[bool, typer.Option("--tls/--no-tls", help="Also open a TLS listener with a throwaway CA.")] = True,
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Leave it running; `mqttlab brokers stop` ends it.")
    ] = False,
    workdir: Annotated[Optional[Path], typer.Option(help="Where config, certificates and log go.")] = None,
) -> None:
    """Start a broker on free loopback ports: in the foreground until Ctrl-C, or detached."""
    from mqttlab.brokers import BrokerError

    launcher = _launcher(name)
    if launcher.name == "external":
        raise _fail("an external broker is started by you; mqttlab only connects to it", BAD_INPUT)
    record_path = state_dir() / f"{launcher.name}.json"
    if record_path.exists():
        record = json.loads(record_path.read_text())
        if _recorded_pid_alive(record):
            raise _fail(f"{launcher.name} is already running detached (PID {record['pid']}); "
                        f"`mqttlab brokers stop {launcher.name}` first", BAD_INPUT)
        record_path.unlink()
    directory = workdir or state_dir() / launcher.name
    try:
        broker = launcher.start(directory, tls=tls, detach=detach)
    except BrokerError as error:
        raise _fail(f"cannot start {launcher.name}: {error}", CANNOT_START) from None
    if detach:
        typer.echo(_describe(broker))
        path = _record(broker, directory)
        typer.echo(f"running detached; recorded in {path}; stop it with `mqttlab brokers stop {broker.name}`")
        return
    # From here on Ctrl-C, wherever it lands, is the normal way to stop.
    try:
        typer.echo(_describe(broker))
        typer.echo("press Ctrl-C to stop")
        while broker.is_running():
            time.sleep(0.5)
    except KeyboardInterrupt:
        typer.echo("stopping ...")
        broker.stop()
        return
    broker.stop()
    raise _fail(f"{broker.name} exited on its own; see {broker.log_file}", 1)


@app.command("stop")
def stop_command(
    name: Annotated[
        Optional[str], typer.Argument(help="Broker to stop; all detached brokers if omitted.", show_default=False)
    ] = None,
) -> None:
    """Stop brokers started with `mqttlab brokers start --detach`."""
    from mqttlab.brokers.process import terminate_pid

    state = state_dir()
    if name is not None:
        paths = [state / f"{_launcher(name).name}.json"]
        if not paths[0].exists():
            raise _fail(f"no detached {name} is recorded in {state}", BAD_INPUT)
    else:
        paths = sorted(state.glob("*.json")) if state.is_dir() else []
        if not paths:
            typer.echo("no detached brokers are recorded")
            return
    for path in paths:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            typer.echo(f"ignoring unreadable record {path}: {error}", err=True)
            continue
        label = record.get("name", path.stem)
        if _recorded_pid_alive(record):
            if not terminate_pid(record["pid"]):
                raise _fail(f"{label} (PID {record['pid']}) did not stop", 1)
            typer.echo(f"stopped {label} (PID {record['pid']})")
        else:
            typer.echo(f"{label} was no longer running")
        path.unlink(missing_ok=True)


@app.command("probe")
def probe_command(
    broker: Annotated[
        Optional[str],
        typer.Argument(help="A broker mqttlab launches (mosquitto, ...), mqtt://HOST:PORT, or image:REF, as `run --broker` takes it.", show_default=False),
    ] = None,
    all_brokers: Annotated[bool, typer.Option("--all", help="Probe every broker available here, one after the other.")] = False,
    features: Annotated[
        Optional[list[str]], typer.Option("--feature", "-f", help="Probe only these features (repeatable, or KEY,KEY); default all.")
    ] = None,
    write: Annotated[
        Optional[Path], typer.Option("--write", help="With --all: rewrite the feature matrix section of this file (docs/brokers.md).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
) -> None:
    """Which features a broker supports, measured: a tiny real run per feature (MQTT 3.1.1 and 5,
    QoS 0/1/2, wildcards, shared subscriptions, retained messages, persistent sessions, wills, TLS,
    WebSocket), each judged by a printed rule: supported, refused (why) or broken (the violation
    and its count). Exit codes: 0 probed, 1 some feature broken, 2 bad input, 3 cannot start or reach it."""
    from mqttlab.brokers import BrokerError
    from mqttlab.features import matrix
    from mqttlab.features.probe import BASE_TEXT, ProbeCannotStart, ProbeUnreachable, select

    problems = []
    if all_brokers == (broker is not None):
        problems.append("BROKER: give one broker, or --all")
    if broker is not None:
        from mqttlab.brokers import UnknownBroker, get_launcher

        try:
            get_launcher(broker)  # a name, a URL or an image: refused here, before anything starts
        except (UnknownBroker, BrokerError) as error:
            problems.append(f"BROKER: {error}")
    if write is not None and not all_brokers:
        problems.append("--write: only with --all (the matrix holds every broker)")
    try:
        chosen = select(key for given in features or [] for key in given.split(","))
    except ValueError as error:
        problems.append(f"--feature: {error}")
    if problems:
        raise _fail("; ".join(problems), BAD_INPUT)
    if all_brokers:
        _probe_all(chosen, write, as_json)
        return
    assert broker is not None
    try:
        probed = _probe_one(broker, chosen, as_json)
    except ValueError as error:
        raise _fail(str(error), BAD_INPUT) from None
    except (ProbeCannotStart, ProbeUnreachable) as error:
        raise _fail(str(error), CANNOT_START) from None
    if as_json:
        typer.echo(json.dumps(probed.to_dict(), indent=2))
    else:
        probed_features = [entry for entry, _ in probed.findings]
        lines = ["", f"What each run does ({BASE_TEXT}):", *[f"  {line}" for line in matrix.runs(probed_features)],
                 "Rules:", *[f"  {line}" for line in matrix.rules(probed_features)]]
        Console(width=200).print("\n".join(lines), markup=False, highlight=False)
    if any(found.result == "broken" for _, found in probed.findings):
        raise typer.Exit(1)


def _probe_one(broker: str, chosen: list[Any], quiet: bool) -> Any:
    """One broker's probe, each feature's row printed as it is found (unless `quiet`)."""
    from mqttlab.features import matrix
    from mqttlab.features.probe import probe

    console = Console(width=200)

    def show(entry: Any, found: Any) -> None:
        if not quiet:
            console.print(f"  {entry.name:<26} {matrix.cell(found)}", markup=False, highlight=False)

    if not quiet:
        console.print(f"probing {broker} ...", markup=False, highlight=False)
    probed = probe(broker, chosen, on_finding=show)
    if not quiet:
        console.print(f"{probed.name}: {probed.version or 'version unknown'} ({probed.configuration})", markup=False, highlight=False)
    return probed


def _probe_all(chosen: list[Any], write: Optional[Path], as_json: bool) -> None:
    """Every available broker probed in turn; one that cannot start is shown with its reason."""
    from mqttlab.brokers import get_launcher, launcher_names
    from mqttlab.features import matrix
    from mqttlab.features.probe import BrokerProbe, ProbeCannotStart

    probes: list[BrokerProbe] = []
    unavailable: dict[str, str] = {}
    for name in launcher_names():
        if name == "external":
            continue
        launcher = get_launcher(name)
        found = launcher.availability()
        if not found.available:
            unavailable[name] = found.detail
            continue
        try:
            probes.append(_probe_one(name, chosen, as_json))
        except ProbeCannotStart as error:
            if not as_json:
                typer.echo(f"  {error}")
            probes.append(BrokerProbe(name, name, found.version, launcher.config.mode, problem=f"failed to start: {error}"))
    if as_json:
        typer.echo(json.dumps({"brokers": [p.to_dict() for p in probes], "unavailable": unavailable}, indent=2))
    if write is not None:
        try:
            matrix.write(write, matrix.markdown(probes, unavailable))
        except (OSError, matrix.MatrixError) as error:
            raise _fail(f"--write: {error}", BAD_INPUT) from None
        typer.echo(f"wrote the feature matrix of {len(probes)} brokers into {write}")
    if any(found.result == "broken" for p in probes for _, found in p.findings):
        raise typer.Exit(1)

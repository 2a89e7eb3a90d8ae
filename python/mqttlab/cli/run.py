"""`mqttlab run`, `mqttlab report` and `mqttlab scenario schema|validate`. The run itself is
`mqttlab.session`; this module turns its outcome into tables and an exit code (`mqttlab.exits`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterator, Optional

import typer

from mqttlab import pacing
from mqttlab.exits import Exit, exit_code_for

# The run path (scenario, engine, session: pydantic, numpy, the compiled engine) is imported by
# the commands that use it, so that `mqttlab --version` and `--help` start at once; the display
# (rich) where something is shown, so that a run with --json does without it.
if TYPE_CHECKING:
    from rich.console import Console

    from mqttlab.live.state import RunState
    from mqttlab.live.view import LiveProgress
    from mqttlab.environment.bring_up import Starting
    from mqttlab.routing import RoutingCheck
    from mqttlab.scenario import Scenario
    from mqttlab.session import Display, RunResult

__all__ = ["Exit", "exit_code_for", "flag_overrides"]

scenario_app = typer.Typer(
    help="Scenario files: their JSON Schema and validation.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr)


def _fail(message: str, code: Exit) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(int(code))


# --- run -----------------------------------------------------------------------------------

Text = Optional[str]


def flag_overrides(**flags: Any) -> dict[str, Any]:
    """Scenario field paths set by emqtt-bench style flags; flags left out override nothing."""
    overrides: dict[str, Any] = {}
    for flag, value in flags.items():
        if value is None or value == []:
            continue
        if flag in ("ca", "cert", "key"):
            value = str(Path(value).absolute())  # relative to where the command runs, not the scenario
        for path in FLAG_PATHS[flag]:
            overrides[path] = value
    return overrides


# The scenario fields each flag sets, so that a problem with one of them names the flag too.
FLAG_PATHS = {
    "broker": ("broker",),
    "persistence": ("launch.persistence",),
    "pubs": ("publishers.count",),
    "subs": ("subscribers.count",),
    "topic": ("publishers.topic",),
    "filters": ("subscribers.filters",),
    "qos": ("publishers.qos", "subscribers.qos"),
    "size": ("publishers.payload",),
    "rate": ("publishers.rate",),
    "arrival": ("publishers.arrival",),
    "duration": ("load.duration",),
    "warmup": ("load.warmup",),
    "messages": ("publishers.messages",),
    "inflight": ("publishers.inflight",),
    "mqtt_version": ("mqtt.version",),
    "username": ("mqtt.username",),
    "password": ("mqtt.password",),
    "ca": ("tls.ca",),
    "cert": ("tls.cert",),
    "key": ("tls.key",),
    "connect_rate": ("load.connect_rate",),
    "seed": ("load.seed",),
    "offline_at": ("subscribers.offline.at",),
    "offline_for": ("subscribers.offline.duration",),
    "offline_fraction": ("subscribers.offline.fraction",),
    "retained_at": ("subscribers.retained.at",),
    "retained_spread": ("subscribers.retained.spread",),
    "will_leave": ("publishers.will.leave",),
    "will_at": ("publishers.will.at",),
}


def _naming_flags(error: Any, given: Mapping[str, Any]) -> str:
    """The scenario's problem listing, each problem with a field a flag set naming that flag:
    `load.warmup (--warmup): ...`."""
    flags = {path: "--" + flag.replace("_", "-") for flag, paths in FLAG_PATHS.items() if given.get(flag) not in (None, []) for path in paths}
    lines: list[str] = []
    said = set()
    for problem in error.problems:
        flag = flags.get(problem.path)
        if flag is not None and (flag, problem.message) in said:
            continue  # `--qos 3` sets both QoS fields: its one problem is said once
        said.add((flag, problem.message))
        lines.append(f"  {problem.path} ({flag}): {problem.message}" if flag else f"  {problem}")
    count = len(lines)
    lines.insert(0, f"{error.source}: {count} problem{'s' if count != 1 else ''}")
    return "\n".join(lines)


def _warmup_outlasts_duration(error: Any, duration: Optional[str], warmup: Optional[str], assignments: list[str]) -> bool:
    """Whether the only problem is a warm-up from the file that a --duration given on the
    command line (and no --warmup) left too long."""
    warmup_set = warmup is not None or any(text.partition("=")[0].strip() == "load.warmup" for text in assignments)
    return (duration is not None and not warmup_set and len(error.problems) == 1
            and error.problems[0].path == "load.warmup" and "shorter than load.duration" in error.problems[0].message)


def _one_broker(broker: Optional[list[str]]) -> Optional[str]:
    """`run` measures one broker: several (`-b a -b b`, `-b a,b`) are pointed to the commands
    that measure several."""
    names = [name for given in broker or [] for name in ([given] if "://" in given else given.split(","))]
    if len(names) > 1:
        raise _fail(f"error: --broker: `run` measures one broker (got {', '.join(names)}); for several, "
                    f"`mqttlab suite run SUITE --brokers {','.join(names)}`, or one `run` each and then `mqttlab compare DIR DIR`", Exit.BAD_INPUT)
    return names[0] if names else None


def _check_assignments(assignments: list[str]) -> None:
    """`--set publishers.qos 2` would take `2` as the scenario file: refuse a --set without `=`."""
    for text in assignments:
        if "=" not in text:
            raise _fail(f"error: --set {text}: expected KEY=VALUE without spaces, e.g. --set publishers.qos=2", Exit.BAD_INPUT)


def run_command(
    scenario_file: Annotated[Optional[Path], typer.Argument(help="Scenario YAML; none = the built-in default scenario.", show_default=False)] = None,
    broker: Annotated[Optional[list[str]], typer.Option("--broker", "-b", help="mqtt(s)://HOST:PORT, a broker to launch (rumqttd, mosquitto, ...), or a container image (image:emqx/emqx:5.8). Default: the embedded rumqttd. One broker: several are `suite run --brokers` or `compare`.")] = None,
    assignments: Annotated[Optional[list[str]], typer.Option("--set", help="Set any scenario field: --set publishers.qos=2 (repeatable).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Results directory. Default: results/<time>-<name>/, a file its scenario name, flags the shape (fan-in-20-1-qos1-100ps).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json, with the scenario's name and the broker's name, version and URL, instead of tables.")] = False,
    pubs: Annotated[Optional[int], typer.Option("--pubs", "-P", help="Number of publishers.")] = None,
    subs: Annotated[Optional[int], typer.Option("--subs", "-S", help="Number of subscribers.")] = None,
    topic: Annotated[Text, typer.Option("--topic", "-t", help="Publish topic template (%i = index, %c = client id).")] = None,
    filters: Annotated[Optional[list[str]], typer.Option("--filter", "-f", help="Subscription filter template (repeatable).")] = None,
    qos: Annotated[Optional[int], typer.Option("--qos", "-q", help="QoS of publishes and subscriptions: 0, 1 or 2.")] = None,
    size: Annotated[Text, typer.Option("--size", "-s", help="Payload size: 64, 1KB (1000 B), 1KiB (1024 B); under 16 B measured by topic and sequence number instead of the 16-byte header.")] = None,
    rate: Annotated[Optional[float], typer.Option("--rate", "-r", help="Messages per second per publisher.")] = None,
    arrival: Annotated[Text, typer.Option("--arrival", help=pacing.arrival_help())] = None,
    duration: Annotated[Text, typer.Option("--duration", "-d", help="Load phase, warm-up included: 10s, 2m, ...")] = None,
    warmup: Annotated[Text, typer.Option("--warmup", help="Warm-up at the start of the duration, excluded from the statistics. Default: 2s, or a fifth of a --duration under 10s.")] = None,
    messages: Annotated[Optional[int], typer.Option("--messages", "-n", help="Messages per publisher (instead of running for the duration).")] = None,
    inflight: Annotated[Optional[int], typer.Option("--inflight", help="QoS>0 window per publisher; sends due while it is full are dropped.")] = None,
    mqtt_version: Annotated[Text, typer.Option("--mqtt-version", "-V", help="3 (= 3.1.1) or 5.")] = None,
    username: Annotated[Text, typer.Option("--username", "-u", help="MQTT user name.")] = None,
    password: Annotated[Text, typer.Option("--password", help="MQTT password.")] = None,
    ca: Annotated[Text, typer.Option("--ca", help="CA certificate file (mqtts://).")] = None,
    cert: Annotated[Text, typer.Option("--cert", help="Client certificate file (mqtts://).")] = None,
    key: Annotated[Text, typer.Option("--key", help="Client key file (mqtts://).")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Skip TLS certificate verification (mqtts://); with a launched broker: its TLS listener, as --tls.")] = False,
    tls: Annotated[bool, typer.Option("--tls", help="Launched broker: clients connect over its TLS listener (a throwaway CA, verified). For a URL: mqtts://.")] = False,
    websocket: Annotated[bool, typer.Option("--websocket", help="Launched broker: clients connect over its WebSocket listener (MQTT over ws://; with --tls, wss://). For a URL: ws:// or wss://.")] = False,
    persistence: Annotated[Optional[bool], typer.Option("--persistence/--no-persistence", help="Launched broker: its persistence on (state written to disk in the run's directory) or off, where its launcher has it (docs/state.md). Default: as its config has it.", show_default=False)] = None,
    connect_rate: Annotated[Optional[float], typer.Option("--connect-rate", help="New connections per second; 0 = unlimited.")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of the send schedule and payload sizes.")] = None,
    offline_at: Annotated[Text, typer.Option("--offline-at", help="Offline sessions: subscribers leave their persistent sessions this long into the load (with --offline-for; docs/state.md).")] = None,
    offline_for: Annotated[Text, typer.Option("--offline-for", help="Offline sessions: how long each stays away before it comes back to drain its queue.")] = None,
    offline_fraction: Annotated[Optional[float], typer.Option("--offline-fraction", help="Offline sessions: the share of the subscribers that go (default: all).")] = None,
    retained_at: Annotated[Text, typer.Option("--retained-at", help="A retained read: the publishers retain their --messages updates, the subscribers subscribe this long into the load and get the retained store (docs/state.md).")] = None,
    retained_spread: Annotated[Text, typer.Option("--retained-spread", help="A retained read: the subscribers' SUBSCRIBEs spread over this long (default 0: a storm).")] = None,
    will_leave: Annotated[Text, typer.Option("--will-leave", help="Wills: the publishers have a will on will/%i and leave this way: close, reset, silent or graceful (with --will-at; subscribers watch with --filter 'will/#'; docs/state.md).")] = None,
    will_at: Annotated[Text, typer.Option("--will-at", help="Wills: when the publishers leave, from the start of the load.")] = None,
    no_latency: Annotated[bool, typer.Option("--no-latency", help="Do not record latency histograms.")] = False,
    dask: Annotated[Text, typer.Option("--dask", help="Run across a Dask cluster: tcp://SCHEDULER:8786, or local:N for N worker processes here.")] = None,
    allow_missing_shards: Annotated[bool, typer.Option("--allow-missing-shards", help="With --dask: a lost worker does not by itself fail the run (exit code).")] = False,
    source_addresses: Annotated[Optional[list[str]], typer.Option("--source-addresses", help="With --dask: HOST=ADDR,ADDR local addresses a worker host connects from, for more connections than its source ports (repeatable).")] = None,
    capture: Annotated[bool, typer.Option("--capture", help="Capture the run's MQTT traffic with tshark and report message bundling (MQTT packets per TCP segment).")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Refuse (exit 2) a run whose publishers' topics and subscribers' filters leave something unmeasured, instead of warning.")] = False,
    metrics: Annotated[Text, typer.Option("--metrics", help="Serve live Prometheus/OpenMetrics metrics at HOST:PORT during the run (docs/metrics.md).")] = None,
    metrics_linger: Annotated[str, typer.Option("--metrics-linger", help="Keep serving the final figures this long after the run: one scrape interval.")] = "15s",
) -> None:
    """Run a load test against a broker and write a results directory."""
    from mqttlab import planning, results, session
    from mqttlab.scenario import ScenarioError

    _check_assignments(assignments or [])
    one_broker = _one_broker(broker)
    if tls and one_broker is not None and "://" in one_broker:
        raise _fail("error: --tls: is for a broker mqttlab launches; for a broker given by URL, write mqtts://HOST:PORT "
                    "(with --ca FILE, or --insecure)", Exit.BAD_INPUT)
    flags = dict(
        broker=one_broker, pubs=pubs, subs=subs, topic=topic, filters=filters, qos=qos, size=size, rate=rate,
        arrival=arrival, duration=duration, warmup=warmup, messages=messages, inflight=inflight,
        mqtt_version=mqtt_version, username=username, password=password, ca=ca, cert=cert, key=key,
        connect_rate=connect_rate, seed=seed, offline_at=offline_at, offline_for=offline_for, offline_fraction=offline_fraction,
        retained_at=retained_at, retained_spread=retained_spread, will_leave=will_leave, will_at=will_at, persistence=persistence,
    )  # fmt: skip
    overrides = flag_overrides(**flags)
    if offline_at is not None and not any(text.partition("=")[0].strip() == "mqtt.clean_start" for text in assignments or []):
        overrides.setdefault("mqtt.clean_start", False)  # what offline sessions are: persistent ones
    if will_leave is not None:
        overrides.setdefault("publishers.will.topic", "will/%i")
    if retained_at is not None:
        overrides.setdefault("publishers.retain", True)  # what a retained read reads
        overrides.setdefault("publishers.messages", 1)
    if insecure:
        overrides["tls.insecure"] = True
    if tls:
        overrides["launch.tls"] = True
    if websocket:
        overrides["launch.websocket"] = True
    if arrival in pacing.MODES and not pacing.MODES[arrival].scheduled and rate is None:
        overrides["publishers.rate"] = None  # a file's open-loop rate does not apply without a schedule
    if no_latency:
        overrides["options.record_latency"] = False
    try:
        scenario = _load_checked(scenario_file, overrides=overrides, assignments=assignments or ())
    except ScenarioError as error:
        if not _warmup_outlasts_duration(error, duration, warmup, assignments or []):
            raise _fail(_naming_flags(error, flags), Exit.BAD_INPUT) from None
        # `--duration 3s` on a file whose warm-up is 5s: the warm-up follows the duration the
        # user just set, as the default one does, and says so.
        try:
            scenario = _load_checked(scenario_file, overrides={**overrides, "load.warmup": None}, assignments=assignments or ())
        except ScenarioError as again:
            raise _fail(_naming_flags(again, flags), Exit.BAD_INPUT) from None
        _console(stderr=True).print(f"note: the scenario's warm-up does not fit --duration {duration}: {scenario.load.warmup:g}s instead "
                                    "(--warmup to choose)", style="yellow", markup=False, highlight=False)
    routing = _check_routing(scenario, strict)
    name_by_shape(scenario, routing, scenario_file, assignments or [])

    addresses: dict[str, list[str]] = {}
    if source_addresses and dask is None:
        raise _fail("error: --source-addresses: only with --dask (it names worker hosts)", Exit.BAD_INPUT)
    if dask is not None:
        problem = planning.single_process_problem(scenario)
        if problem:
            raise _fail(f"error: {problem}; not with --dask", Exit.BAD_INPUT)
        from mqttlab.distributed import BadClusterSpec, PlanningError, SchedulerUnreachable, check_reachable, parse_source_addresses

        try:
            addresses = parse_source_addresses(source_addresses or [])
            check_reachable(dask)
        except (BadClusterSpec, PlanningError) as error:
            raise _fail(f"error: {error}", Exit.BAD_INPUT) from None
        except SchedulerUnreachable as error:
            raise _fail(f"error: {error}", Exit.UNREACHABLE) from None
    directory = out if out is not None else results.default_results_dir(scenario.name)
    try:
        session.prepare(directory)
    except session.RunFailed as error:
        raise _fail(str(error), error.code) from None

    states: list[RunState] = []  # the run's live state once its plan is known, for the endpoint
    try:
        with _metrics_server(metrics or scenario.options.metrics, metrics_linger, states):
            code = _run_and_record(directory, as_json, lambda display, starting: session.execute(
                scenario, directory, display=display, starting=starting, dask=dask, allow_missing_shards=allow_missing_shards,
                source_addresses=addresses, capture=True if capture else None, routing=routing, states=states,
            ))
    except KeyboardInterrupt:  # outside the engine call, e.g. while a broker starts
        raise _fail("interrupted before the load started; no results were written", Exit.INTERRUPTED) from None
    raise typer.Exit(int(code))


def name_by_shape(scenario: Scenario, routing: RoutingCheck, scenario_file: Optional[Path], assignments: list[str], paced: bool = True) -> None:
    """A run from flags is named by its shape (fan-in-20-1-qos1-100ps, mqttlab.shape), so that
    its results directory, `report` and `compare` say what ran; a scenario file, a `--set name=`
    and a run of the default scenario's shape keep their name. `paced=False` leaves the rate out
    (a capacity search's probes each run at their own)."""
    if scenario_file is not None or any(text.partition("=")[0].strip() == "name" for text in assignments):
        return
    from mqttlab import session
    from mqttlab.planning import default_scenario
    from mqttlab.shape import shape_name

    default = default_scenario()
    name = shape_name(scenario, routing, paced)
    if name != shape_name(default, session.routing_of(default), paced):
        scenario.name = name


def _load_checked(path: Optional[Path], **changes: Any) -> Scenario:
    """The scenario (load_scenario) checked against the broker it names too (mqttlab.preflight):
    what `run` refuses before anything starts, and so what `scenario validate` refuses."""
    from mqttlab.preflight import broker_problems
    from mqttlab.planning import load_scenario
    from mqttlab.scenario import ScenarioError

    scenario = load_scenario(path, **changes)
    problems = broker_problems(scenario)
    if problems:
        raise ScenarioError(problems, str(path) if path is not None else "built-in default scenario")
    return scenario


def _check_routing(scenario: Scenario, strict: bool) -> RoutingCheck:
    """Before anything starts: say loudly when the topics and filters leave something
    unmeasured, and refuse such a run with --strict."""
    from mqttlab import session

    routing = session.routing_of(scenario)
    if routing.warnings:
        from mqttlab.summary_view import routing_panel

        _console(stderr=True).print(routing_panel(routing.to_dict(), before=True))
        if strict:
            raise _fail("error: --strict: the topics and filters above leave something unmeasured", Exit.BAD_INPUT)
    return routing


def _metrics_server(address: Optional[str], linger: str, states: list[RunState]) -> Any:
    """The live metrics endpoint (serving `states`), or nothing without an address."""
    if not address:
        return nullcontext()
    from mqttlab import session
    from mqttlab.scenario.units import parse_duration

    try:
        server = session.metrics_server(address, states, parse_duration(linger))
    except ValueError as error:
        raise _fail(f"error: --metrics-linger: {error}", Exit.BAD_INPUT) from None
    except session.RunFailed as error:
        raise _fail(str(error), error.code) from None
    url = f"http://{server.host}:{server.port}/metrics"
    _console(stderr=True).print(f"metrics: {url}", style="dim", highlight=False)
    return announced_linger(server, url)


@contextmanager
def announced_linger(server: Any, url: str) -> Iterator[Any]:
    """The metrics server, stopped after the run; when it stays up with the final figures, the
    wait is said, with how to end it (it would otherwise look like a hang after the summary)."""
    try:
        yield server
    except BaseException:
        server.stop(0.0)  # after an error or Ctrl-C nobody waits for final figures
        raise
    if server.linger > 0:
        _console(stderr=True).print(f"metrics: the final figures stay at {url} for {server.linger:g} s, one scrape interval "
                                    "(--metrics-linger 0 to end at once; Ctrl-C ends the wait)", style="dim", highlight=False)
    server.stop()


def _run_and_record(directory: Path, as_json: bool, execute: Callable[[Optional[Display], Starting], RunResult]) -> Exit:
    """The run (`execute`: `session.execute` given the run's options, called with the live
    display and the broker's start display), then its summary; the exit code it means."""
    from mqttlab import session
    from mqttlab.environment import host_load

    def display(header: str, state: RunState) -> LiveProgress:
        from mqttlab.live.view import LiveProgress

        return LiveProgress(_console(stderr=True), header=header, state=state)

    def starting(name: str) -> AbstractContextManager[None]:
        from mqttlab.live.view import broker_starting

        return broker_starting(_console(stderr=True), name)

    # With --json the display shows only on a terminal (the JSON is the output); without one the
    # run imports no display at all.
    shown = display if not as_json or sys.stderr.isatty() else None
    before = host_load.cpu_times()
    host: dict[str, Any] = {}
    try:
        try:
            outcome = execute(shown, starting)
        finally:
            # Beside the figures of a run that measured (never alone in a failed run's --out); a
            # disk too full for it has already made the run incomplete, and says so.
            if (directory / "summary.json").is_file():
                host = host_load.host_load(before, host_load.cpu_times())
                with suppress(OSError):
                    host_load.write(directory, host)
    except session.ResultsIncomplete as error:
        _show(error.result.summary, directory, as_json, None, host)
        raise _fail(str(error), error.code) from None
    except session.RunFailed as error:
        raise _fail(str(error), error.code) from None
    _show(outcome.summary, directory, as_json, outcome.manifest, host)
    return outcome.exit_code


def _show_capture(section: dict[str, Any]) -> None:
    if section.get("error"):
        _console(stderr=True).print(f"capture: {section['error']}", style="yellow", markup=False)
        return
    from mqttlab.netem.view import render_bundling

    _console().print(render_bundling(section))


def _who(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What `--json` adds to summary.json from the manifest, so that the figures say whose they
    are: the scenario's name and the broker's name, version and URL."""
    broker = manifest.get("broker") or {}
    return {"scenario": manifest.get("scenario"), "broker": {key: broker.get(key) for key in ("name", "version", "url")}}


def _show(summary: Mapping[str, Any], directory: Path, as_json: bool, manifest: Optional[Mapping[str, Any]], host: Mapping[str, Any]) -> None:
    """The summary as `run` prints it at the end and `report` prints it again from disk, with the
    run's manifest (None: its directory has none to name the broker from) and host load."""
    if as_json:
        typer.echo(json.dumps({**summary, **_who(manifest), **({"host_load": host} if host else {})} if manifest is not None else summary, indent=2))
        return
    from mqttlab.summary_view import broker_line, print_summary

    print_summary(_console(), summary, str(directory), host)
    line = broker_line(manifest.get("broker") or {}) if manifest is not None else None
    if line is not None:
        _console().print(line)
    if manifest is not None:
        from mqttlab.calibration import describe

        _console().print(describe(manifest.get("calibration"), summary.get("measurement")),
                         style="dim", markup=False, highlight=False)
    if "network" in summary:
        from mqttlab.netem.view import render_network

        _console().print(render_network(summary["network"]))
    if "capture" in summary:
        _show_capture(summary["capture"])
    for fault in summary.get("faults") or []:
        _console().print(_fault_line(fault, float(summary.get("warmup_s") or 0.0)), highlight=False, markup=False)


def _fault_line(fault: Mapping[str, Any], warmup_s: float = 0.0) -> str:
    """One line per fault of summary.json's `faults` (docs/faults.md), every time on the load's
    clock as `at` is (summary.json's start_s counts from the measured window: + the warm-up)."""
    head = f"fault {fault['kind']} at {fault['asked_at_s']:g} s for {fault['duration_s']:g} s"
    if not fault.get("applied"):
        return f"{head}: not applied ({fault.get('problem')})"
    worst = fault.get("worst_e2e_us")
    recovered = fault.get("recovered_after_s")
    return (
        f"{head}: {fault['lasted_s']:.2f} s from {fault['start_s'] + warmup_s:.2f} s; {fault['received_during']} received inside"
        + (f", worst latency of the messages caught in it {worst / 1000:.0f} ms" if worst is not None else "")
        + (f"; back within the pre-fault band ({fault['band_us'] / 1000:.1f} ms) {recovered:g} s after" if recovered is not None
           else f"; {fault.get('recovery_note')}")
        + (f"; sessions: {fault['verdict']}" if fault.get("verdict") else "")
    )


# --- report --------------------------------------------------------------------------------


def report_command(
    results_dir: Annotated[Path, typer.Argument(help="A results directory written by `mqttlab run` (or a suite directory, with --watch).", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json, with the scenario's name and the broker's name, version and URL, instead of tables.")] = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Follow a run or suite that another process is writing into the directory, until it ends.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.1, help="With --watch: seconds between looks.")] = 1.0,
) -> None:
    """Print the summary of a finished run from its results directory, or follow one under way."""
    if watch:
        raise typer.Exit(int(_watch(results_dir, as_json, interval)))
    from mqttlab import results
    try:
        loaded = results.load_results(results_dir)
    except results.ResultsError as error:
        from mqttlab.live.state import read_live

        live = read_live(results_dir)
        ended = _ended_without_results(results_dir, live, stale_after=30.0)
        if ended is None and live is not None:
            ended = f"error: {results_dir}: a run is still writing here; follow it with `mqttlab report --watch {results_dir}`"
        runs = _runs_below(results_dir) if ended is None else []
        if runs:
            raise _fail(f"error: {results_dir} is not one run but holds {len(runs)} (a suite, or results of several runs): "
                        f"`mqttlab compare {results_dir}` sets them side by side; `mqttlab report {runs[0]}` reads one", Exit.BAD_INPUT) from None
        raise _fail(ended or f"error: {error}", Exit.BAD_INPUT if ended is None else Exit.ABNORMAL) from None
    _report(loaded, as_json)


def _runs_below(directory: Path) -> list[Path]:
    """The results directories inside `directory` (a suite's runs), nearest first."""
    from mqttlab import results

    if not directory.is_dir():
        return []
    return sorted((manifest.parent for manifest in directory.rglob(results.MANIFEST)), key=lambda path: (len(path.parts), str(path)))


def _report(loaded: Any, as_json: bool) -> None:
    """A finished run from disk: what ran, then its summary as `run` printed it."""
    if not as_json:
        _console().print(_what_ran(loaded.manifest, loaded.plan, loaded.summary), highlight=False, markup=False)
    from mqttlab.environment import host_load

    _show(loaded.summary, loaded.path, as_json, loaded.manifest, host_load.read(loaded.path))


def _what_ran(manifest: Mapping[str, Any], plan: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
    """`report`'s opening, as `run`'s header said it: scenario, broker, protocol and the plan line."""
    from mqttlab.summary_text import plan_line

    broker = manifest.get("broker") or {}
    target = plan.get("broker") or {}
    version = {3: "3.1", 4: "3.1.1", 5: "5"}.get(int((plan.get("mqtt") or {}).get("version") or 0), "?")
    over = ("TLS" if target.get("tls") else "TCP") if not target.get("websocket") else ("wss" if target.get("tls") else "ws")
    if plan.get("transport"):  # only MQTT-SN plans carry one
        over = "MQTT-SN over UDP through the gateway"
    name, release = str(broker.get("name", "?")), str(broker.get("version") or "")
    who = release if release.startswith(name) else f"{name} {release}"
    head = (f"{manifest.get('scenario', '?')} against {who} at {broker.get('url', '?')}: "
            f"MQTT {version} over {over}, started {manifest.get('started_at', '?')}")
    return f"{' '.join(head.split())}\n{plan_line(plan, summary.get('defaults_followed'))}"


def _watch(directory: Path, as_json: bool, interval: float) -> Exit:
    """Follows the live.json of a run (or the runs.json of a suite) until the run's manifest
    (or every run of the suite) is there, one line per update, then prints the summary."""
    import time

    from mqttlab import results
    from mqttlab.live.state import read_live, suite_state
    from mqttlab.live.view import snapshot_line

    err = _console(stderr=True)
    last = None
    try:
        while True:
            if (directory / "runs.json").is_file():
                state = suite_state(directory)
                if state is not None:
                    line = _suite_line(state)
                    if line != last:
                        err.print(line, markup=False, highlight=False, soft_wrap=True)
                        last = line
                    if state["left"] == 0:
                        return Exit.OK if not state["failed"] else Exit.FINDINGS
            elif (directory / results.MANIFEST).is_file():
                loaded = results.load_results(directory)
                _report(loaded, as_json)
                return exit_code_for(loaded.summary)
            else:
                live = read_live(directory)
                ended = _ended_without_results(directory, live, stale_after=max(30.0, 10 * interval))
                if ended is not None:
                    raise _fail(ended, Exit.ABNORMAL)
                line = f"waiting for {directory} ..." if live is None else snapshot_line(live.get("snapshot") or {}, live.get("progress"))
                if line != last:
                    err.print(line, markup=False, highlight=False, soft_wrap=True)
                    last = line
            time.sleep(interval)
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except results.ResultsError as error:
        raise _fail(f"error: {error}", Exit.BAD_INPUT) from None


def _ended_without_results(directory: Path, live: Optional[Mapping[str, Any]], stale_after: float) -> Optional[str]:
    """Why a run directory without a manifest will not get one: its run failed, its results
    could not all be written, or its live.json stopped being updated (the process is gone)."""
    import time

    if live is None:
        if (directory / "summary.json").is_file() and not (directory / "manifest.json").is_file():
            live = {"status": "incomplete"}  # live.json did not fit on the disk that filled
        else:
            return None
    status = live.get("status")
    if status == "failed":
        return f"error: the run in {directory} failed before its results were written: {live.get('error') or 'no reason recorded'}"
    if status == "incomplete":
        return f"error: the run in {directory} was measured but its results could not all be written (no manifest.json); summary.json may hold its figures"
    age = time.time() - float(live.get("updated_unix") or 0)
    if status == "running" and age > stale_after:
        return (f"error: the run in {directory} stopped updating its live.json {age:.0f} s ago and wrote no results: "
                "its process ended without finishing (killed, or a crash)")
    return None


def _suite_line(state: dict[str, Any]) -> str:
    from mqttlab.live.state import format_seconds
    from mqttlab.live.view import progress_text

    text = f"suite {state['suite']}: {state['done']}/{state['runs']} runs done"
    if state["failed"]:
        text += f" ({state['failed']} failed)"
    if state["left"]:
        text += f", {state['left']} left, ~{format_seconds(state['left_s'])}"
    live = state.get("current_live")
    if state.get("current"):
        done = progress_text((live or {}).get("progress"))
        text += f" · now {state['current']}" + (f": {done}" if done else "")
    return text


# --- scenario ------------------------------------------------------------------------------


@scenario_app.command("schema")
def scenario_schema_command() -> None:
    """Print the JSON Schema of scenario files."""
    from mqttlab.scenario import scenario_json_schema

    typer.echo(scenario_json_schema())


@scenario_app.command("validate")
def scenario_validate_command(
    files: Annotated[list[Path], typer.Argument(help="Scenario YAML files.", show_default=False)],
) -> None:
    """Check scenario files and list every problem; exit code 2 when any file has one."""
    from mqttlab.scenario import ScenarioError

    broken = 0
    for path in files:
        try:
            scenario = _load_checked(path)
        except ScenarioError as error:
            broken += 1
            typer.echo(error.listing(), err=True)
            continue
        typer.echo(f"ok: {path} ({scenario.name})")
    if broken:
        raise typer.Exit(int(Exit.BAD_INPUT))

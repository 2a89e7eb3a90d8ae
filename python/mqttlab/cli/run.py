"""`mqttlab run`, `mqttlab report` and `mqttlab scenario schema|validate`.

Exit codes (also in docs/results.md): 0 completed cleanly; 1 completed with violations, losses or
failed connections; 2 bad input; 3 broker unreachable or not startable before any load; 4 run
ended abnormally (broker lost), partial results written; 130 interrupted, partial results written."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import sys
from contextlib import ExitStack, nullcontext
from enum import IntEnum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from mqttlab import __version__, engine, results
from mqttlab.cli.app import app
from mqttlab.live_state import RunState
from mqttlab.live_view import LiveProgress
from mqttlab.routing import RoutingCheck, check_routing
from mqttlab.scenario import Scenario, ScenarioError, load_scenario, scenario_json_schema, scenario_to_yaml
from mqttlab.scenario.fields import is_url, split_url
from mqttlab.scenario.units import parse_duration
from mqttlab.summary_view import broker_line, plan_line, print_summary, routing_panel


class Exit(IntEnum):
    OK = 0
    FINDINGS = 1
    BAD_INPUT = 2
    UNREACHABLE = 3
    ABNORMAL = 4
    INTERRUPTED = 130


EMBEDDED_BROKER = "rumqttd"

scenario_app = typer.Typer(
    help="Scenario files: their JSON Schema and validation.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(scenario_app, name="scenario")


def _fail(message: str, code: Exit) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(int(code))


def exit_code_for(summary: dict[str, Any]) -> Exit:
    status = summary.get("status")
    if status == "interrupted":
        return Exit.INTERRUPTED
    if status != "completed":
        return Exit.ABNORMAL
    messages = summary.get("messages") or {}
    connections = summary.get("connections") or {}
    failed_connections = sum((counts or {}).get("failed", 0) for counts in connections.values())
    if summary.get("violations") or messages.get("lost") or failed_connections or nothing_owed(summary):
        return Exit.FINDINGS
    return Exit.OK


def nothing_owed(summary: dict[str, Any]) -> bool:
    """A run with publishers and subscribers in which no subscriber was owed any message."""
    routing = summary.get("routing") or {}
    return bool(routing.get("publishers") and routing.get("subscribers") and not routing.get("unknown")
                and routing.get("unmatched_publishers") == routing.get("publishers"))


# --- run -----------------------------------------------------------------------------------

Text = Optional[str]


def flag_overrides(**flags: Any) -> dict[str, Any]:
    """Scenario field paths set by emqtt-bench style flags; flags left out override nothing."""
    paths = {
        "broker": ("broker",),
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
    }
    overrides: dict[str, Any] = {}
    for flag, value in flags.items():
        if value is None or value == []:
            continue
        if flag in ("ca", "cert", "key"):
            value = str(Path(value).absolute())  # relative to where the command runs, not the scenario
        for path in paths[flag]:
            overrides[path] = value
    return overrides


@app.command("run")
def run_command(
    scenario_file: Annotated[Optional[Path], typer.Argument(help="Scenario YAML; none = the built-in default scenario.", show_default=False)] = None,
    broker: Annotated[Text, typer.Option("--broker", "-b", help="mqtt(s)://HOST:PORT, or a broker to launch (rumqttd, mosquitto, ...). Default: the embedded rumqttd.")] = None,
    assignments: Annotated[Optional[list[str]], typer.Option("--set", help="Set any scenario field: --set publishers.qos=2 (repeatable).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Results directory. Default: results/<time>-<scenario name>/.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json instead of tables.")] = False,
    pubs: Annotated[Optional[int], typer.Option("--pubs", "-P", help="Number of publishers.")] = None,
    subs: Annotated[Optional[int], typer.Option("--subs", "-S", help="Number of subscribers.")] = None,
    topic: Annotated[Text, typer.Option("--topic", "-t", help="Publish topic template (%i = index, %c = client id).")] = None,
    filters: Annotated[Optional[list[str]], typer.Option("--filter", "-f", help="Subscription filter template (repeatable).")] = None,
    qos: Annotated[Optional[int], typer.Option("--qos", "-q", help="QoS of publishes and subscriptions: 0, 1 or 2.")] = None,
    size: Annotated[Text, typer.Option("--size", "-s", help="Payload size: 64, 1KB (1000 B), 1KiB (1024 B); at least 16.")] = None,
    rate: Annotated[Optional[float], typer.Option("--rate", "-r", help="Messages per second per publisher.")] = None,
    arrival: Annotated[Text, typer.Option("--arrival", help="Send schedule: constant or poisson.")] = None,
    duration: Annotated[Text, typer.Option("--duration", "-d", help="Load phase, warm-up included: 10s, 2m, ...")] = None,
    warmup: Annotated[Text, typer.Option("--warmup", help="Warm-up excluded from the statistics: 2s, ...")] = None,
    messages: Annotated[Optional[int], typer.Option("--messages", "-n", help="Messages per publisher (instead of running for the duration).")] = None,
    inflight: Annotated[Optional[int], typer.Option("--inflight", help="QoS>0 window per publisher; sends due while it is full are dropped.")] = None,
    mqtt_version: Annotated[Text, typer.Option("--mqtt-version", "-V", help="3 (= 3.1.1) or 5.")] = None,
    username: Annotated[Text, typer.Option("--username", "-u", help="MQTT user name.")] = None,
    password: Annotated[Text, typer.Option("--password", help="MQTT password.")] = None,
    ca: Annotated[Text, typer.Option("--ca", help="CA certificate file (mqtts://).")] = None,
    cert: Annotated[Text, typer.Option("--cert", help="Client certificate file (mqtts://).")] = None,
    key: Annotated[Text, typer.Option("--key", help="Client key file (mqtts://).")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Skip TLS certificate verification.")] = False,
    connect_rate: Annotated[Optional[float], typer.Option("--connect-rate", help="New connections per second; 0 = unlimited.")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of the send schedule and payload sizes.")] = None,
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
    overrides = flag_overrides(
        broker=broker, pubs=pubs, subs=subs, topic=topic, filters=filters, qos=qos, size=size, rate=rate,
        arrival=arrival, duration=duration, warmup=warmup, messages=messages, inflight=inflight,
        mqtt_version=mqtt_version, username=username, password=password, ca=ca, cert=cert, key=key,
        connect_rate=connect_rate, seed=seed,
    )  # fmt: skip
    if insecure:
        overrides["tls.insecure"] = True
    if no_latency:
        overrides["options.record_latency"] = False
    try:
        scenario = load_scenario(scenario_file, overrides=overrides, assignments=assignments or ())
    except ScenarioError as error:
        raise _fail(error.listing(), Exit.BAD_INPUT) from None
    routing = _check_routing(scenario, strict)

    addresses: dict[str, list[str]] = {}
    if source_addresses and dask is None:
        raise _fail("error: --source-addresses: only with --dask (it names worker hosts)", Exit.BAD_INPUT)
    if dask is not None:
        problem = engine.single_process_problem(scenario)
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
    capture_problem = None
    if capture:
        problem = _capture_problem(scenario, dask)
        if problem:
            raise _fail(f"error: --capture: {problem}", Exit.BAD_INPUT)
    elif scenario.options.capture:
        # Asked for by the scenario (so by every run of a suite): a host or run that cannot be
        # captured is still measured, and its summary says why it has no bundling table.
        capture_problem = _capture_problem(scenario, dask)
        capture = capture_problem is None
    directory = out if out is not None else results.default_results_dir(scenario.name)
    try:
        results.check_writable(directory)
        engine.load_engine()
    except (results.ResultsError, engine.EngineUnavailable) as error:
        raise _fail(f"error: {error}", Exit.BAD_INPUT) from None

    states: list[RunState] = []  # the run's live state once its plan is known, for the endpoint
    try:
        with _metrics_server(metrics or scenario.options.metrics, metrics_linger, states):
            code = _run_and_record(
                scenario, directory, as_json, dask=dask, allow_missing_shards=allow_missing_shards, source_addresses=addresses,
                capture=capture, capture_problem=capture_problem, routing=routing, states=states,
            )
    except KeyboardInterrupt:  # outside the engine call, e.g. while a broker starts
        raise _fail("interrupted before the load started; no results were written", Exit.INTERRUPTED) from None
    raise typer.Exit(int(code))


def _check_routing(scenario: Scenario, strict: bool) -> RoutingCheck:
    """Before anything starts: say loudly when the topics and filters leave something
    unmeasured, and refuse such a run with --strict. The plan's topics do not depend on where the
    broker is, so any address will do here."""
    plan = engine.compile_plan(scenario, "mqtt://127.0.0.1:1883")
    routing = check_routing(plan, followed=scenario.defaults_followed.get("subscribers.filters"))
    if routing.warnings:
        Console(stderr=True).print(routing_panel(routing.to_dict(), before=True))
        if strict:
            raise _fail("error: --strict: the topics and filters above leave something unmeasured", Exit.BAD_INPUT)
    return routing


def _metrics_server(address: Optional[str], linger: str, states: list[RunState]) -> Any:
    """The live metrics endpoint (serving `states`), or nothing without an address."""
    if not address:
        return nullcontext()
    from mqttlab.metrics import MetricsError, MetricsServer

    try:
        seconds = parse_duration(linger)
        server = MetricsServer(address, lambda: {"runs": [state.to_dict() for state in states]}, linger=seconds)
        server.start()
    except ValueError as error:
        raise _fail(f"error: --metrics-linger: {error}", Exit.BAD_INPUT) from None
    except MetricsError as error:
        raise _fail(f"error: {error}", Exit.BAD_INPUT) from None
    Console(stderr=True).print(f"metrics: http://{server.host}:{server.port}/metrics", style="dim", highlight=False)
    return server


def _run_and_record(
    scenario: Scenario,
    directory: Path,
    as_json: bool,
    *,
    dask: Optional[str] = None,
    allow_missing_shards: bool = False,
    source_addresses: Optional[dict[str, list[str]]] = None,
    capture: bool = False,
    capture_problem: Optional[str] = None,
    routing: Optional[RoutingCheck] = None,
    states: Optional[list[RunState]] = None,
) -> Exit:
    err = Console(stderr=True)
    started_at = dt.datetime.now(dt.timezone.utc)
    with ExitStack() as stack:
        network = _open_network(scenario, directory, stack)
        broker = _open_broker(scenario, directory, stack, placement=network.placement() if network else None)
        url = _engine_url(scenario, broker)
        gateway = _open_gateway(scenario, directory, stack, url, placement=network.placement() if network else None)
        if gateway is not None:
            url = f"mqtt://{gateway.host}:{gateway.port}"  # the engine's MQTT-SN clients send here (UDP)
        if network is not None:
            from mqttlab.netem import session

            url = session.broker_url(url, network)
            network_info = session.measure_before(network)
        if scenario.launch.tls:
            scenario = _trusting_launched_ca(scenario, broker)
        scenario = _with_broker_login(scenario, broker)
        plan = engine.compile_plan(scenario, url)
        header = f"mqttlab {__version__}: {scenario.name} against {broker.name} at {url}\n{plan_line(plan, scenario.defaults_followed)}"
        sampler = _resource_sampler(getattr(broker, "pid", None))
        state = RunState(plan, run=directory.name, scenario=scenario.name, broker=str(broker.name), shard="all" if dask is None else "dask",
                         directory=directory, resources=sampler,
                         owed_per_message=routing.owed_per_message if routing is not None and not routing.unknown else None)
        if states is not None:
            states.append(state)
        capturing = _open_capture(url, directory, network) if capture else None
        try:
            with sampler, LiveProgress(err, enabled=not as_json or err.is_terminal, header=header, state=state) as live:
                outcome = _execute(plan, _observed(state, live), url, dask, source_addresses)
        except engine.BrokerUnreachable as error:
            raise _fail(f"error: {error}", Exit.UNREACHABLE) from None
        except engine.PlanRejected as error:
            raise _fail(f"error: the engine rejected the plan (a bug in mqttlab, please report it): {error}", Exit.BAD_INPUT) from None
        finally:
            if capturing is not None:
                capturing.stop()
        cgroup = getattr(broker, "cgroup", None)
        broker_info = results.BrokerInfo(name=broker.name, version=broker.version, url=url, pid=broker.pid,
                                         config=getattr(broker, "config", None),
                                         limits=cgroup.outcome() if cgroup is not None else None)
        if capturing is not None:
            outcome.summary["capture"] = _analyse_capture(capturing)
        elif capture_problem is not None:
            outcome.summary["capture"] = {"error": f"options.capture: {capture_problem}"}
        if network is not None:
            outcome.summary["network"] = session.measure_after(network, network_info, plan, outcome.result)

    resources = _resource_series(sampler, outcome)
    if routing is not None:
        outcome.summary["routing"] = routing.to_dict()
    if scenario.defaults_followed:
        outcome.summary["defaults_followed"] = scenario.defaults_followed
    manifest = results.build_manifest(
        scenario_name=scenario.name,
        seed=scenario.load.seed,
        broker=broker_info,
        started_at=started_at,
        command_line=shlex.join(["mqttlab", *sys.argv[1:]]),
        status=outcome.status,
        mqttlab_version=__version__,
        engine_version=engine.engine_version(),
    )
    if "measurement" in outcome.summary:
        manifest["measurement"] = outcome.summary["measurement"]
    if dask is not None:
        manifest["distributed"] = outcome.manifest_section()
    if "network" in outcome.summary:
        manifest["network"] = outcome.summary["network"]
    if "capture" in outcome.summary:
        manifest["capture"] = {k: v for k, v in outcome.summary["capture"].items() if k not in ("directions", "by_type")}
    if gateway is not None:
        manifest["gateway"] = gateway.to_dict()
    try:
        results.write_results(
            directory,
            manifest=manifest,
            scenario_yaml=scenario_to_yaml(scenario),
            plan=plan,
            result=outcome.result,
            summary=outcome.summary,
            stats=engine.histogram_stats,
            resources=resources,
        )
    except results.ResultsError as error:
        raise _fail(f"error: {error}", Exit.ABNORMAL) from None
    state.finish(outcome.summary)
    _show(outcome.summary, directory, as_json)
    if "capture" in outcome.summary and outcome.summary["capture"].get("by_type") is not None:
        from mqttlab.netem.capture import write_csv

        write_csv(outcome.summary["capture"], directory / "capture" / "bundling.csv")
    return _exit_code(outcome, allow_missing_shards)


def _capture_problem(scenario: Scenario, dask: Optional[str]) -> Optional[str]:
    """Why the run's MQTT traffic cannot be captured and decoded here, or None."""
    from mqttlab.netem.capture import tshark_path

    if tshark_path() is None:
        return "tshark is not installed (Debian: apt-get install tshark; scripts/install-test-tools.sh does it)"
    if dask is not None:
        return "not with --dask (the clients run on other hosts)"
    if scenario.transport.kind != "mqtt":
        return "MQTT over TCP only: an MQTT-SN datagram is one packet, there is nothing to bundle"
    if (scenario.broker or "").startswith(("mqtts://", "ssl://")):
        return "not over TLS (tshark cannot read the MQTT packets inside)"
    return None


def _open_capture(url: str, directory: Path, network: Any) -> Any:
    """tshark on the device the clients' segments cross: the host end of the emulated link, `lo`
    for a broker on this host, else every device (`any`)."""
    from mqttlab.netem.capture import Capture, CaptureError

    _, host, port = split_url(url)
    if network is not None:
        device = network.host_tun if network.method == "emulator" else network.host_veth
    elif host in ("localhost", "::1") or host.startswith("127."):
        device = "lo"
    else:
        device = "any"
    capture = Capture(device, int(port), directory / "capture")
    try:
        capture.start()
    except CaptureError as error:
        raise _fail(f"error: --capture: {error}", Exit.BAD_INPUT) from None
    return capture


def _analyse_capture(capture: Any) -> dict[str, Any]:
    from mqttlab.netem.capture import CaptureError

    try:
        return capture.analyse()
    except CaptureError as error:  # the run itself is fine: keep its results, say why there is no table
        return {"device": capture.device, "port": capture.port, "error": str(error)}


def _show_capture(section: dict[str, Any]) -> None:
    if section.get("error"):
        Console(stderr=True).print(f"capture: {section['error']}", style="yellow")
        return
    from mqttlab.netem.view import render_bundling

    Console().print(render_bundling(section))


def _observed(state: RunState, live: LiveProgress) -> Any:
    """The progress callback: the live state (file and metrics) first, then the display."""

    def observe(snapshot: dict[str, Any]) -> None:
        try:
            state.update(snapshot)
        except Exception:  # noqa: BLE001 — an exception here would stop the engine's run
            pass
        live(snapshot)

    return observe


def _execute(
    plan: engine.Plan, live: Any, url: str, dask: Optional[str], source_addresses: Optional[dict[str, list[str]]] = None
) -> engine.RunOutcome:
    """One shard in this process, or the whole plan across a Dask cluster (mqttlab.distributed)."""
    if dask is None:
        return engine.run(plan, progress=live, broker_url=url)
    from mqttlab import distributed

    try:
        return distributed.run_on_dask(plan, dask, progress=live, broker_url=url, source_addresses=source_addresses)
    except distributed.SchedulerUnreachable as error:
        raise _fail(f"error: {error}", Exit.UNREACHABLE) from None
    except distributed.ClusterRefused as error:
        raise _fail(f"error: the Dask cluster cannot run this plan: {error}", Exit.BAD_INPUT) from None
    except distributed.NoShardReturned as error:
        raise _fail(f"error: {error}; no results were written", Exit.ABNORMAL) from None


def _exit_code(outcome: engine.RunOutcome, allow_missing_shards: bool) -> Exit:
    """Shards lost with their worker fail the run unless the user accepted that beforehand."""
    missing = getattr(outcome, "missing", None)
    if not missing:
        return exit_code_for(outcome.summary)
    if not allow_missing_shards:
        return Exit.ABNORMAL
    from mqttlab.distributed import judged_without_missing

    return exit_code_for(judged_without_missing(outcome))  # type: ignore[arg-type]


def _resource_sampler(broker_pid: Optional[int]) -> Any:
    """Samples the broker's (when its PID is known) and this process's CPU and memory every
    second on the engine's clock; a broker PID that is gone only drops the broker's figures."""
    from mqttlab.resources import RunResources

    try:
        return RunResources(broker_pid)
    except ValueError:
        return RunResources(None)


def _resource_series(sampler: Any, outcome: engine.RunOutcome) -> Optional[dict[str, Any]]:
    start = outcome.result.get("start_mono_ns")
    if not start:
        return None  # the run never reached its measured window
    series = sampler.series(int(start))
    outcome.summary["resources"] = results.summarize_resources(series, outcome.summary.get("measured_s"))
    return series


def _open_broker(scenario: Scenario, directory: Path, stack: ExitStack, placement: Any = None) -> Any:
    """The RunningBroker to measure: described from a URL, or launched (and stopped on exit).
    `placement` (from a network section) runs a launched broker inside the emulated network."""
    from mqttlab.brokers import BrokerError, UnknownBroker, get_launcher

    target = scenario.broker or EMBEDDED_BROKER
    try:
        launcher = get_launcher(target)
    except UnknownBroker as error:
        raise _fail(f"error: broker: {error}", Exit.BAD_INPUT) from None
    if placement is not None:
        if is_url(target):
            raise _fail("error: network: needs a broker that mqttlab launches (a name such as mosquitto), not a URL", Exit.BAD_INPUT)
        launcher.placement = placement
    try:
        if is_url(target):
            return launcher.describe()  # the engine's own connect reports an unreachable broker
        launch = scenario.launch
        launcher.configure(launch.config, launch.version, launch.limits.model_dump() if launch.limits else None)
        return stack.enter_context(launcher.start(directory / "broker", tls=launch.tls))
    except BrokerError as error:
        raise _fail(f"error: cannot start {target}: {error}", Exit.UNREACHABLE) from None


def _open_gateway(scenario: Scenario, directory: Path, stack: ExitStack, broker_url: str, placement: Any = None) -> Any:
    """For `transport: mqtt-sn`, mqttlab's MQTT-SN gateway in front of the broker (stopped on
    exit), placed beside a broker that runs in an emulated network; else None."""
    if scenario.transport.kind != "mqtt-sn":
        return None
    from mqttlab.brokers import BrokerError
    from mqttlab.brokers.gateway import GatewayLauncher

    launcher = GatewayLauncher()
    if placement is not None:
        launcher.placement = placement
    t = scenario.transport
    try:
        return stack.enter_context(
            launcher.start(directory / "gateway", broker_url, predefined=dict(t.predefined), retry_ms=max(1, int(t.retry * 1000)))
        )
    except BrokerError as error:
        raise _fail(f"error: MQTT-SN gateway: {error}", Exit.UNREACHABLE) from None


def _open_network(scenario: Scenario, directory: Path, stack: ExitStack) -> Any:
    """The emulated network of a `network:` section (torn down on exit), or None."""
    if scenario.network is None:
        return None
    from mqttlab.netem import EmulatedNetwork, NetemError

    try:
        return stack.enter_context(EmulatedNetwork(scenario.network, directory / "network", seed=scenario.load.seed))
    except NetemError as error:
        raise _fail(f"error: network: {error}", Exit.UNREACHABLE) from None


def _with_broker_login(scenario: Scenario, broker: Any) -> Scenario:
    """A launched broker that admits no anonymous client (ejabberd) names the login its clients
    use; the scenario's own user name, if any, wins."""
    credentials = getattr(broker, "credentials", None)
    if not credentials or scenario.mqtt.username is not None:
        return scenario
    mqtt = scenario.mqtt.model_copy(update={"username": credentials[0], "password": credentials[1]})
    return scenario.model_copy(update={"mqtt": mqtt})


def _trusting_launched_ca(scenario: Scenario, broker: Any) -> Scenario:
    """The scenario with the launched broker's throwaway CA trusted; its certificate names the
    address the broker is reached at (loopback, or the emulated network's), so it is verified."""
    from mqttlab.scenario.model import TlsSettings

    tls = TlsSettings.model_construct(ca=str(broker.ca_file), cert=None, key=None, insecure=False, server_name=None)
    return scenario.model_copy(update={"tls": tls})


def _engine_url(scenario: Scenario, broker: Any) -> str:
    if is_url(scenario.broker):
        scheme, host, port = split_url(scenario.broker or "")
        return f"{scheme}://{host}:{port}"
    if scenario.launch.tls:
        return str(broker.url(tls=True))
    # Some brokers (rumqttd) serve MQTT 5 on a listener of its own.
    if scenario.mqtt.version == 5 and getattr(broker, "v5_port", None):
        return f"mqtt://{broker.host}:{broker.v5_port}"
    return str(broker.url())


def _manifest_broker(directory: Path) -> dict[str, Any]:
    try:
        return json.loads((directory / results.MANIFEST).read_text(encoding="utf-8")).get("broker") or {}
    except (OSError, ValueError):
        return {}


def _show(summary: dict[str, Any], directory: Path, as_json: bool) -> None:
    """The summary as `run` prints it at the end and `report` prints it again from disk."""
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    print_summary(Console(), summary, str(directory))
    line = broker_line(_manifest_broker(directory))
    if line is not None:
        Console().print(line)
    if "network" in summary:
        from mqttlab.netem.view import render_network

        Console().print(render_network(summary["network"]))
    if "capture" in summary:
        _show_capture(summary["capture"])


# --- report --------------------------------------------------------------------------------


@app.command("report")
def report_command(
    results_dir: Annotated[Path, typer.Argument(help="A results directory written by `mqttlab run` (or a suite directory, with --watch).", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json instead of tables.")] = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Follow a run or suite that another process is writing into the directory, until it ends.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.1, help="With --watch: seconds between looks.")] = 1.0,
) -> None:
    """Print the summary of a finished run from its results directory, or follow one under way."""
    if watch:
        raise typer.Exit(int(_watch(results_dir, as_json, interval)))
    try:
        loaded = results.load_results(results_dir)
    except results.ResultsError as error:
        raise _fail(f"error: {error}", Exit.BAD_INPUT) from None
    _show(loaded.summary, loaded.path, as_json)


def _watch(directory: Path, as_json: bool, interval: float) -> Exit:
    """Follows the live.json of a run (or the runs.json of a suite) until the run's manifest
    (or every run of the suite) is there, one line per update, then prints the summary."""
    import time

    from mqttlab.live_state import read_live, suite_state
    from mqttlab.live_view import snapshot_line

    err = Console(stderr=True)
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
                _show(loaded.summary, loaded.path, as_json)
                return exit_code_for(loaded.summary)
            else:
                live = read_live(directory)
                line = f"waiting for {directory} ..." if live is None else snapshot_line(live.get("snapshot") or {}, live.get("progress"))
                if line != last:
                    err.print(line, markup=False, highlight=False, soft_wrap=True)
                    last = line
            time.sleep(interval)
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except results.ResultsError as error:
        raise _fail(f"error: {error}", Exit.BAD_INPUT) from None


def _suite_line(state: dict[str, Any]) -> str:
    from mqttlab.live_state import format_seconds
    from mqttlab.live_view import progress_text

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
    typer.echo(scenario_json_schema())


@scenario_app.command("validate")
def scenario_validate_command(
    files: Annotated[list[Path], typer.Argument(help="Scenario YAML files.", show_default=False)],
) -> None:
    """Check scenario files and list every problem; exit code 2 when any file has one."""
    broken = 0
    for path in files:
        try:
            scenario = load_scenario(path)
        except ScenarioError as error:
            broken += 1
            typer.echo(error.listing(), err=True)
            continue
        typer.echo(f"ok: {path} ({scenario.name})")
    if broken:
        raise typer.Exit(int(Exit.BAD_INPUT))

"""One run of a scenario, start to finish: the emulated network, the broker, the MQTT-SN gateway,
the engine (here or across a Dask cluster), traffic capture and resource sampling, then the
results directory. The one code path behind `mqttlab run` (and so every suite run, each a
`mqttlab run`) and behind `mqttlab.run()` for notebooks and scripts:

    import mqttlab
    result = mqttlab.run("scenarios/default.yaml", broker="mosquitto", set={"load.duration": "5s"})
    result.summary["latency"]["e2e"]["p99_us"], result.series().tail(), result.latency()

Failures that leave nothing to measure raise `RunFailed` with the exit code they mean; a run that
started always comes back as a `RunResult` (its summary says how it ended), with its directory
written, also when it was interrupted or lost its broker."""

from __future__ import annotations

import datetime as dt
import shlex
import sys
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

from mqttlab import engine, results
from mqttlab._version import VERSION
from mqttlab.exits import Exit, exit_code_for
from mqttlab.faults import FaultDriver, fault_section
from mqttlab.live_state import RunState
from mqttlab.routing import RoutingCheck, check_routing
from mqttlab.scenario import Scenario, load_scenario, scenario_to_yaml
from mqttlab.scenario.fields import is_url, split_url, websocket_path
from mqttlab.summary_view import plan_line
from mqttlab.summary_types import Summary, add_section, typed

EMBEDDED_BROKER = "rumqttd"

Progress = Callable[[dict[str, Any]], None]
# Given the run's header line and live state once the broker is up and the plan is known, a
# context (around the load) whose value receives every progress snapshot: the CLI's live display.
Display = Callable[[str, RunState], AbstractContextManager[Progress]]
# Given a broker's name, a context around its launch: the CLI's "starting rabbitmq … 12 s".
Starting = Callable[[str], AbstractContextManager[Any]]


class RunFailed(Exception):
    """A run that could not be made, or whose results could not be kept: a one-line reason and
    the exit code it means."""

    def __init__(self, message: str, code: Exit) -> None:
        super().__init__(message)
        self.code = code


class ResultsIncomplete(RunFailed):
    """A run that was measured but whose results directory could not be written whole (a full
    disk): `result` holds what was measured, so the figures are still shown; the directory keeps
    what could be written, without a manifest, its live.json saying "incomplete"."""

    def __init__(self, message: str, result: "RunResult") -> None:
        super().__init__(message, Exit.ABNORMAL)
        self.result = result


@dataclass
class RunResult:
    """A finished run: its results directory and what it holds, with pandas views of it."""

    directory: Path
    plan: dict[str, Any]
    result: dict[str, Any]  # the engine's raw result (result.json)
    summary: Summary  # summary.json (mqttlab.summary_types)
    exit_code: Exit  # what `mqttlab run` exits with for it
    outcome: Any  # the engine.RunOutcome (a distributed one knows its missing shards)

    @property
    def status(self) -> str:
        return str(self.summary.get("status"))

    def histogram(self, name: str = "e2e") -> Any:
        """One latency histogram (µs) as an `hdrh.histogram.HdrHistogram`: e2e,
        e2e_uncorrected, puback, pubcomp, connect, tls, websocket, connack, suback, schedule_lag, rtt."""
        from hdrh.histogram import HdrHistogram

        encoded = (self.result.get("histograms") or {}).get(name)
        if not encoded:
            raise KeyError(f"no {name} histogram in this run (it has: {', '.join(sorted(self.result.get('histograms') or {}))})")
        return HdrHistogram.decode(encoded)

    def latency(self) -> Any:
        """Statistics of every latency histogram the run recorded, one row each (µs)."""
        import pandas as pd

        rows = []
        for name, encoded in sorted((self.result.get("histograms") or {}).items()):
            stats = engine.histogram_stats(encoded) if encoded else None
            if stats and stats.get("count"):
                rows.append({"histogram": name, **stats})
        return pd.DataFrame(rows).set_index("histogram") if rows else pd.DataFrame()

    def series(self) -> Any:
        """The per-second series (series.csv): sent, acked, received, dropped, errors, e2e
        percentiles; `t_s` is seconds from the measured window's start."""
        import pandas as pd

        return pd.read_csv(self.directory / "series.csv")

    def resources(self) -> Any:
        """Broker and generator CPU and memory per second (resources.csv), when sampled."""
        import pandas as pd

        path = self.directory / "resources.csv"
        return pd.read_csv(path) if path.is_file() else pd.DataFrame()


def run(
    scenario: Union[Scenario, str, Path, None] = None,
    *,
    broker: Optional[str] = None,
    set: Optional[Mapping[str, Any]] = None,  # noqa: A002 — the CLI's --set, by its name
    out: Optional[Union[str, Path]] = None,
    progress: Optional[Progress] = None,
) -> RunResult:
    """Runs a scenario (a Scenario, a YAML path, or None for the built-in default) against
    `broker` (a name mqttlab launches, such as "mosquitto", or an mqtt(s):// or ws(s):// URL; default: the
    scenario's, else the embedded rumqttd), with field overrides as `--set` takes them, into `out`
    (default results/<time>-<name>/). `progress` receives every live snapshot.
    Raises ScenarioError for a bad scenario and RunFailed when the run cannot be made."""
    overrides = dict(set or {})
    if broker is not None:
        overrides["broker"] = broker
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(Path(scenario) if scenario is not None else None, overrides=overrides)
    elif overrides:
        raise ValueError("broker= and set= apply to a scenario file or the default; change a Scenario object with model_copy")
    directory = Path(out) if out is not None else results.default_results_dir(scenario.name)
    prepare(directory)
    display: Optional[Display] = None
    if progress is not None:
        display = lambda header, state: nullcontext(progress)  # noqa: E731
    return execute(scenario, directory, display=display, routing=routing_of(scenario))


def prepare(directory: Path) -> None:
    """Checks, before anything starts, that the results can be written and the engine loads."""
    try:
        results.check_writable(directory)
        _probe_writable(directory)
        engine.load_engine()
    except (results.ResultsError, engine.EngineUnavailable) as error:
        raise RunFailed(f"error: {error}", Exit.BAD_INPUT) from None


def _probe_writable(directory: Path) -> None:
    """Creates the directory and a file in it, then removes what it made: a read-only
    filesystem or a place no directory can be made (/sys) is refused before a broker starts."""
    made = [parent for parent in (directory, *directory.parents) if not parent.exists()]
    probe = directory / ".mqttlab-write-probe"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise results.ResultsError(f"--out {directory}: cannot write the results there ({error.strerror or error}); choose another --out") from None
    finally:
        for path in made:  # deepest first
            try:
                path.rmdir()
            except OSError:
                pass


def routing_of(scenario: Scenario) -> RoutingCheck:
    """How the scenario's publishers and subscribers meet. The plan's topics do not depend on
    where the broker is, so any address will do here."""
    plan = engine.compile_plan(scenario, "mqtt://127.0.0.1:1883")
    return check_routing(plan, followed=scenario.defaults_followed.get("subscribers.filters"))


def execute(scenario: Scenario, directory: Path, **options: Any) -> RunResult:
    """Runs `scenario` and writes its results directory (`_run_into` has the options). A run
    that never started leaves no directory of its own behind, or, when it holds something worth
    reading (a launched broker's log), one whose live.json says "failed" and why, never "running"."""
    existed = directory.exists()
    try:
        return _run_into(scenario, directory, **options)
    except ResultsIncomplete:
        raise
    except BaseException as error:
        _never_started(directory, existed, error)
        raise


def _never_started(directory: Path, existed: bool, error: BaseException) -> None:
    import shutil

    from mqttlab.live_state import LIVE_FILE, read_live, write_live

    if not directory.is_dir():
        return
    left = [path for path in directory.rglob("*") if path.is_file() and path.name != LIVE_FILE]
    if not existed and not left:
        shutil.rmtree(directory, ignore_errors=True)
        return
    live = read_live(directory)
    if live is not None:
        reason = str(error) or ("interrupted" if isinstance(error, KeyboardInterrupt) else type(error).__name__)
        write_live(directory, {**live, "status": "failed", "error": reason.removeprefix("error: ")})


def _run_into(
    scenario: Scenario,
    directory: Path,
    *,
    display: Optional[Display] = None,
    dask: Optional[str] = None,
    allow_missing_shards: bool = False,
    source_addresses: Optional[dict[str, list[str]]] = None,
    capture: bool = False,
    capture_problem: Optional[str] = None,
    routing: Optional[RoutingCheck] = None,
    states: Optional[list[RunState]] = None,
    command_line: Optional[str] = None,
    starting: Optional[Starting] = None,
) -> RunResult:
    """Runs `scenario` and writes its results directory. `display` shows the run while it goes;
    `states` collects its live state (for a metrics endpoint); the rest are `mqttlab run`'s options."""
    started_at = dt.datetime.now(dt.timezone.utc)
    if dask is None:
        _room_for_connections(scenario)
        _check_generator_cpus(scenario)
    with ExitStack() as stack:
        network = _open_network(scenario, directory, stack)
        broker = _open_broker(scenario, directory, stack, placement=network.placement() if network else None, starting=starting)
        url = _engine_url(scenario, broker)
        gateway = _open_gateway(scenario, directory, stack, url, placement=network.placement() if network else None, broker=broker)
        if gateway is not None:
            url = f"mqtt://{gateway.host}:{gateway.port}"  # the engine's MQTT-SN clients send here (UDP)
        if network is not None:
            from mqttlab.netem import session as network_session

            url = network_session.broker_url(url, network)
            network_info = network_session.measure_before(network)
        if scenario.launch.tls:
            scenario = _trusting_launched_ca(scenario, broker)
        scenario = _with_broker_login(scenario, broker)
        plan = engine.compile_plan(scenario, url)
        if dask is None:
            _spread_source_addresses(plan)
        header = f"mqttlab {VERSION}: {scenario.name} against {broker.name} at {url}\n{plan_line(plan, scenario.defaults_followed)}"
        sampler = _resource_sampler(getattr(broker, "pid", None))
        state = RunState(plan, run=directory.name, scenario=scenario.name, broker=str(broker.name), shard="all" if dask is None else "dask",
                         directory=directory, resources=sampler,
                         owed_per_message=routing.owed_per_message if routing is not None and not routing.unknown else None)
        if states is not None:
            states.append(state)
        capturing = _open_capture(url, directory, network) if capture else None
        faults = _fault_driver(scenario, broker, dask, sampler, network, url)
        try:
            with sampler, faults, (display or _no_display)(header, state) as show:
                outcome = _execute(plan, _observed(state, show, faults), url, dask, source_addresses, scenario.options.generator_cpus)
        except (engine.BrokerUnreachable, engine.HostCannotRun) as error:
            raise RunFailed(f"error: {error}", Exit.UNREACHABLE) from None
        except engine.PlanRejected as error:
            raise RunFailed(f"error: the engine rejected the plan (a bug in mqttlab, please report it): {error}", Exit.BAD_INPUT) from None
        finally:
            if capturing is not None:
                capturing.stop()
        cgroup = getattr(broker, "cgroup", None)
        broker_info = results.BrokerInfo(name=broker.name, version=broker.version, url=url, pid=broker.pid,
                                         config=getattr(broker, "config", None),
                                         limits=cgroup.outcome() if cgroup is not None else None)
        if capturing is not None:
            add_section(outcome.summary, "capture", _analyse_capture(capturing))
        elif capture_problem is not None:
            add_section(outcome.summary, "capture", {"error": f"options.capture: {capture_problem}"})
        if network is not None:
            add_section(outcome.summary, "network", network_session.measure_after(network, network_info, plan, outcome.result))
        if isinstance(faults, FaultDriver):
            add_section(outcome.summary, "faults", fault_section(faults.applied, plan, outcome.result, results.series_rows(outcome.result, engine.histogram_stats)))

    resources = _add_context(outcome, scenario, sampler, routing)
    manifest = results.build_manifest(
        scenario_name=scenario.name,
        seed=scenario.load.seed,
        broker=broker_info,
        started_at=started_at,
        command_line=command_line or shlex.join(["mqttlab", *sys.argv[1:]]),
        status=outcome.status,
        mqttlab_version=VERSION,
        engine_version=engine.engine_version(),
    )
    for key in ("measurement", "network"):
        if key in outcome.summary:
            manifest[key] = outcome.summary[key]
    if dask is not None:
        from mqttlab.distributed import DistributedOutcome

        assert isinstance(outcome, DistributedOutcome)  # what run_on_dask returns
        manifest["distributed"] = outcome.manifest_section()
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
        if "capture" in outcome.summary and outcome.summary["capture"].get("by_type") is not None:
            from mqttlab.netem.capture import write_csv

            write_csv(outcome.summary["capture"], directory / "capture" / "bundling.csv")
    except results.ResultsError as error:
        # What was measured is still in memory: the caller shows it; the directory keeps what
        # fitted, and says it is incomplete (no manifest; live.json, if that still fits).
        _mark_incomplete(directory, state)
        measured = RunResult(directory, plan, outcome.result, typed(outcome.summary), Exit.ABNORMAL, outcome)
        raise ResultsIncomplete(f"error: {error}; the figures above were measured but not all kept", measured) from None
    state.finish(outcome.summary)
    return RunResult(directory, plan, outcome.result, typed(outcome.summary), _exit_code(outcome, allow_missing_shards), outcome)


def _mark_incomplete(directory: Path, state: RunState) -> None:
    """live.json says "incomplete", never "running", on a disk that may be full: the files
    written aside are removed first, then it is written in place; failing that, it is removed
    (a directory with summary.json and neither manifest nor live.json reads as incomplete)."""
    import json

    from mqttlab.live_state import LIVE_FILE

    for leftover in directory.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
    state.status = "incomplete"
    try:
        (directory / LIVE_FILE).write_text(json.dumps(state.to_dict()) + "\n", encoding="utf-8")
    except OSError:
        (directory / LIVE_FILE).unlink(missing_ok=True)


def _add_context(outcome: Any, scenario: Scenario, sampler: Any, routing: Optional[RoutingCheck]) -> Optional[dict[str, Any]]:
    """What the run adds to the engine's summary, each a section of its own (summary_types.add_section):
    the broker's and generator's resources, the routing check, the defaults the scenario followed. Returns the per-second resource rows (None before the measured window)."""
    series = None
    start = outcome.result.get("start_mono_ns")
    if start:
        series = sampler.series(int(start))
        add_section(outcome.summary, "resources", results.summarize_resources(series, outcome.summary.get("measured_s")))
    if routing is not None:
        add_section(outcome.summary, "routing", routing.to_dict())
    if scenario.defaults_followed:
        add_section(outcome.summary, "defaults_followed", scenario.defaults_followed)
    return series


def _no_display(header: str, state: RunState) -> AbstractContextManager[Optional[Progress]]:
    return nullcontext(None)


def _observed(state: RunState, show: Optional[Progress], faults: Any = None) -> Progress:
    """The progress callback: the fault timeline and the live state (file and metrics) first,
    then the display."""

    def observe(snapshot: dict[str, Any]) -> None:
        try:
            if isinstance(faults, FaultDriver):
                faults.observe(snapshot)
            state.update(snapshot)
        except Exception:  # noqa: BLE001 — an exception here would stop the engine's run
            pass
        if show is not None:
            show(snapshot)

    return observe


def _room_for_connections(scenario: Scenario) -> None:
    """Open files for every connection, raised before a broker is launched so that it inherits
    the room too; a host that cannot give it stops the run here, saying what to change."""
    try:
        engine.ensure_open_files(scenario.publishers.count + scenario.subscribers.count)
    except engine.HostCannotRun as error:
        raise RunFailed(f"error: {error}", Exit.UNREACHABLE) from None


def _check_generator_cpus(scenario: Scenario) -> None:
    """options.generator_cpus names CPUs of this host, checked before anything is launched."""
    cpus = scenario.options.generator_cpus
    problem = engine.cpus_problem(cpus) if cpus else None
    if problem:
        raise RunFailed(f"error: options.generator_cpus: {problem}", Exit.BAD_INPUT)


def _spread_source_addresses(plan: engine.Plan) -> None:
    """More connections to a loopback broker than one address has source ports: spread them."""
    from mqttlab.source_ports import spread_for_loopback

    shard = plan["shard"]
    connections = (shard["publishers"][1] - shard["publishers"][0]) + (shard["subscribers"][1] - shard["subscribers"][0])
    addresses = spread_for_loopback(connections, str(plan["broker"]["host"]))
    if addresses:
        shard["source_addresses"] = addresses


def _execute(
    plan: engine.Plan, progress: Progress, url: str, dask: Optional[str], source_addresses: Optional[dict[str, list[str]]] = None,
    cpus: Optional[str] = None,
) -> engine.RunOutcome:
    """One shard in this process (on `cpus` when given), or the whole plan across a Dask cluster
    (mqttlab.distributed)."""
    if dask is None:
        return engine.run(plan, progress=progress, broker_url=url, cpus=engine.parse_cpus(cpus) if cpus else None)
    from mqttlab import distributed

    try:
        return distributed.run_on_dask(plan, dask, progress=progress, broker_url=url, source_addresses=source_addresses)
    except distributed.SchedulerUnreachable as error:
        raise RunFailed(f"error: {error}", Exit.UNREACHABLE) from None
    except distributed.ClusterRefused as error:
        raise RunFailed(f"error: the Dask cluster cannot run this plan: {error}", Exit.BAD_INPUT) from None
    except distributed.NoShardReturned as error:
        raise RunFailed(f"error: {error}; no results were written", Exit.ABNORMAL) from None


def _exit_code(outcome: engine.RunOutcome, allow_missing_shards: bool) -> Exit:
    """Shards lost with their worker fail the run unless the user accepted that beforehand."""
    missing = getattr(outcome, "missing", None)
    if not missing:
        return exit_code_for(outcome.summary)
    if not allow_missing_shards:
        return Exit.ABNORMAL
    from mqttlab.distributed import judged_without_missing

    return exit_code_for(judged_without_missing(outcome))  # type: ignore[arg-type]


def _fault_driver(scenario: Scenario, broker: Any, dask: Optional[str], sampler: Any, network: Any, url: str) -> AbstractContextManager[Any]:
    """The scenario's faults bound to the launched broker's process and the emulated link, or
    nothing without faults."""
    if not scenario.faults:
        return nullcontext()
    if dask is not None:
        raise RunFailed("error: faults: not with --dask (the fault timeline follows this process's engine)", Exit.BAD_INPUT)
    needs_process = any(fault.kind.startswith("broker-") for fault in scenario.faults)
    if needs_process and (getattr(broker, "pid", None) is None or not broker.can_restart()):
        raise RunFailed(f"error: faults: {broker.name} runs without a process mqttlab started here; faults need one", Exit.BAD_INPUT)
    import socket

    _, host, port = split_url(url)
    return FaultDriver(scenario.faults, broker, restarted=sampler.broker_restarted, network=network,
                       target=(socket.gethostbyname(host), port))


def _resource_sampler(broker_pid: Optional[int]) -> Any:
    """Samples the broker's (when its PID is known) and this process's CPU and memory every
    second on the engine's clock; a broker PID that is gone only drops the broker's figures."""
    from mqttlab.resources import RunResources

    try:
        return RunResources(broker_pid)
    except ValueError:
        return RunResources(None)


def _open_broker(scenario: Scenario, directory: Path, stack: ExitStack, placement: Any = None, starting: Optional[Starting] = None) -> Any:
    """The RunningBroker to measure: described from a URL, or launched (and stopped on exit).
    `placement` (from a network section) runs a launched broker inside the emulated network;
    `starting` is shown while a launched broker starts."""
    from mqttlab.brokers import BrokerError, UnknownBroker, get_launcher
    from mqttlab.brokers.external import ExternalLauncher

    from mqttlab.brokers.container import ContainerSetupError

    target = scenario.broker or EMBEDDED_BROKER
    try:
        launcher = get_launcher(target)
        if scenario.launch.container is not None and hasattr(launcher, "use_container"):
            launcher.use_container(scenario.launch.container.model_dump())
    except (UnknownBroker, ContainerSetupError) as error:
        raise RunFailed(f"error: broker: {error}", Exit.BAD_INPUT) from None
    if placement is not None:
        if is_url(target):
            raise RunFailed("error: network: needs a broker that mqttlab launches (a name such as mosquitto), not a URL", Exit.BAD_INPUT)
        launcher.placement = placement
    try:
        if isinstance(launcher, ExternalLauncher):
            return launcher.describe()  # the engine's own connect reports an unreachable broker
        launch = scenario.launch
        launcher.configure(launch.config, launch.version, launch.limits.model_dump() if launch.limits else None)
        if launch.websocket and not launcher.has_websocket:
            raise RunFailed(f"error: launch.websocket: {launcher.name} is launched without a WebSocket listener here; "
                            "docs/brokers.md lists the launchers that have one", Exit.BAD_INPUT)
        launcher.websocket = launch.websocket
        with starting(launcher.name or target) if starting is not None else nullcontext():
            return stack.enter_context(launcher.start(directory / "broker", tls=launch.tls))
    except ContainerSetupError as error:
        raise RunFailed(f"error: broker {target}: {error}", Exit.BAD_INPUT) from None
    except BrokerError as error:
        raise RunFailed(f"error: cannot start {target}: {error}", Exit.UNREACHABLE) from None


def _open_gateway(scenario: Scenario, directory: Path, stack: ExitStack, broker_url: str, placement: Any = None,
                  broker: Any = None) -> Any:
    """For `transport: mqtt-sn`, the gateway `transport.gateway` names in front of the broker
    (stopped on exit), placed beside a broker that runs in an emulated network; else None."""
    if scenario.transport.kind != "mqtt-sn":
        return None
    from mqttlab.brokers import BrokerError
    from mqttlab.brokers.gateway import GatewayLauncher
    from mqttlab.brokers.paho_gateway import PahoGatewayLauncher

    t = scenario.transport
    try:
        if t.gateway == "rsmb":
            return _rsmb_gateway(scenario, directory, stack, broker_url, placement, broker)
        launcher = PahoGatewayLauncher() if t.gateway == "paho" else GatewayLauncher()
        if placement is not None:
            launcher.placement = placement
        return stack.enter_context(
            launcher.start(directory / "gateway", broker_url, predefined=dict(t.predefined), retry_ms=max(1, int(t.retry * 1000)))
        )
    except BrokerError as error:
        raise RunFailed(f"error: MQTT-SN gateway {t.gateway} (transport.gateway): {error}", Exit.UNREACHABLE) from None


def _rsmb_gateway(scenario: Scenario, directory: Path, stack: ExitStack, broker_url: str, placement: Any, broker: Any) -> Any:
    """RSMB's own MQTT-SN listener serves the MQTT-SN clients (seed 004's setup): the launched
    broker's when it is RSMB, else an RSMB launched beside the broker (same placement, config mode
    and limits), which then is the clients' broker; docs/mqtt-sn.md says why."""
    from mqttlab.brokers import get_launcher
    from mqttlab.brokers.gateway import RunningGateway

    if getattr(broker, "mqtt_sn_port", None) is not None:
        return RunningGateway(broker.host, broker.mqtt_sn_port, broker_url, broker.pid, broker.log_file,
                              {"role": "the broker's own MQTT-SN listener"}, name="rsmb", version=broker.version)
    launch = scenario.launch
    launcher = get_launcher("rsmb").configure(launch.config if launch.config in ("tuned", "as-shipped") else "tuned",
                                              None, launch.limits.model_dump() if launch.limits else None)
    if placement is not None:
        launcher.placement = placement
    rsmb = stack.enter_context(launcher.start(directory / "gateway"))
    assert rsmb.mqtt_sn_port is not None and rsmb.pid is not None and rsmb.log_file is not None
    return RunningGateway(rsmb.host, rsmb.mqtt_sn_port, broker_url, rsmb.pid, rsmb.log_file,
                          {"role": f"RSMB serves the MQTT-SN clients itself; {getattr(broker, 'name', 'the broker')} carries none of their messages",
                           "config": rsmb.config, "limits": rsmb.cgroup.outcome() if rsmb.cgroup is not None else None},
                          name="rsmb", version=rsmb.version)


def _open_network(scenario: Scenario, directory: Path, stack: ExitStack) -> Any:
    """The emulated network of a `network:` section (torn down on exit), or None."""
    if scenario.network is None:
        return None
    from mqttlab.netem import EmulatedNetwork, NetemError

    conditions = scenario.network
    if any(fault.kind in ("link-down", "link-degrade") for fault in scenario.faults) and conditions.method == "auto":
        # Only the user-space emulator can cut or change the link mid-run (the kernel here has no
        # tc actions to drop with), so a link fault asks for it.
        conditions = conditions.model_copy(update={"method": "emulator"})
    try:
        return stack.enter_context(EmulatedNetwork(conditions, directory / "network", seed=scenario.load.seed))
    except NetemError as error:
        raise RunFailed(f"error: network: {error}", Exit.UNREACHABLE) from None


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
        host = f"[{host}]" if ":" in host else host  # an IPv6 literal, as the URL had it
        return f"{scheme}://{host}:{port}{websocket_path(scenario.broker or '') or ''}"
    if scenario.launch.websocket:
        return str(broker.url(tls=scenario.launch.tls, websocket=True))
    if scenario.launch.tls:
        return str(broker.url(tls=True))
    # Some brokers (rumqttd) serve MQTT 5 on a listener of its own.
    if scenario.mqtt.version == 5 and getattr(broker, "v5_port", None):
        return f"mqtt://{broker.host}:{broker.v5_port}"
    return str(broker.url())


def capture_problem(scenario: Scenario, dask: Optional[str]) -> Optional[str]:
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
        raise RunFailed(f"error: --capture: {error}", Exit.BAD_INPUT) from None
    return capture


def _analyse_capture(capture: Any) -> dict[str, Any]:
    from mqttlab.netem.capture import CaptureError

    try:
        return capture.analyse()
    except CaptureError as error:  # the run itself is fine: keep its results, say why there is no table
        return {"device": capture.device, "port": capture.port, "error": str(error)}

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
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Union

from mqttlab import calibration, engine, planning, promises, restart_survival, results
from mqttlab._version import VERSION
from mqttlab.environment.bring_up import EMBEDDED_BROKER, RunEnvironment, Starting, bring_up
from mqttlab.exits import Exit, LoadRefused, RunFailed, exit_code_for
from mqttlab.live.state import RunState
from mqttlab.routing import RoutingCheck, check_routing
from mqttlab.planning import load_scenario
from mqttlab.scenario import Scenario, scenario_to_yaml
from mqttlab.state_memory import state_memory
from mqttlab.summary_text import plan_line
from mqttlab.summary_types import Summary, add_section, typed

if TYPE_CHECKING:
    from mqttlab.brokers.gateway import RunningGateway
    from mqttlab.live.metrics import MetricsServer
    from mqttlab.environment.resources import RunResources

__all__ = ["EMBEDDED_BROKER", "ResultsIncomplete", "RunFailed", "RunResult", "execute", "metrics_server", "prepare", "routing_of", "run"]

Progress = Callable[[dict[str, Any]], None]
#: how long the metrics endpoint stays up after the run with the final figures: one scrape interval
METRICS_LINGER_S = 15.0
# Given the run's header line and live state once the broker is up and the plan is known, a
# context (around the load) whose value, when not None, receives every progress snapshot: the
# CLI's live display.
Display = Callable[[str, RunState], AbstractContextManager[Optional[Progress]]]


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
    plan: engine.Plan  # the RunPlan (plan.json; mqttlab.plan_types)
    result: dict[str, Any]  # the engine's raw result (result.json)
    summary: Summary  # summary.json (mqttlab.summary_types)
    manifest: dict[str, Any]  # manifest.json (mqttlab.results.build_manifest): the broker, the host, the seed
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
    metrics_linger: float = METRICS_LINGER_S,
) -> RunResult:
    """Runs a scenario (a Scenario, a YAML path, or None for the built-in default) against
    `broker` (a name mqttlab launches, such as "mosquitto", or an mqtt(s):// or ws(s):// URL; default: the
    scenario's, else the embedded rumqttd), with field overrides as `--set` takes them, into `out`
    (default results/<time>-<name>/). `progress` receives every live snapshot. A scenario's
    `options.metrics` endpoint is served during the run and `metrics_linger` seconds after it.
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
    states: list[RunState] = []
    with metrics_server(scenario.options.metrics, states, metrics_linger) if scenario.options.metrics else nullcontext():
        return execute(scenario, directory, display=display, states=states)


def metrics_server(address: str, states: list[RunState], linger: float = METRICS_LINGER_S) -> MetricsServer:
    """The live metrics endpoint at `address`, started, serving the runs whose live state is in
    `states` (a run adds its own once its plan is known); as a context, it stops `linger` seconds
    after the run, so that a scraper still sees the final figures (docs/metrics.md)."""
    from mqttlab.live.metrics import MetricsError, MetricsServer

    try:
        return MetricsServer(address, lambda: {"runs": [state.to_dict() for state in states]}, linger=linger).start()
    except MetricsError as error:
        raise RunFailed(f"error: {error}", Exit.BAD_INPUT) from None


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
    """How the scenario's publishers and subscribers meet, read from its plan (no broker needed)."""
    return check_routing(planning.plan_of(scenario), followed=scenario.defaults_followed.get("subscribers.filters"))


def execute(
    scenario: Scenario,
    directory: Path,
    *,
    display: Optional[Display] = None,
    dask: Optional[str] = None,
    allow_missing_shards: bool = False,
    source_addresses: Optional[dict[str, list[str]]] = None,
    capture: Optional[bool] = None,
    routing: Optional[RoutingCheck] = None,
    states: Optional[list[RunState]] = None,
    command_line: Optional[str] = None,
    starting: Optional[Starting] = None,
) -> RunResult:
    """Runs `scenario`: brings up its environment, runs the plan once, writes the results
    directory. `display` shows the run while it goes; `states` collects its live state (for a
    metrics endpoint); `capture` True is `--capture` (None: as the scenario's options.capture
    says); `routing` is the check already shown (else made here); `starting` shows a launched
    broker's start; the rest are `mqttlab run`'s options. A run that never started leaves no
    directory of its own behind, or, when it holds something worth reading (a launched broker's
    log), one whose live.json says "failed" and why, never "running"."""
    started_at = dt.datetime.now(dt.timezone.utc)
    with _failure_recorded(directory):
        with bring_up(scenario, directory, dask=dask, capture=capture, starting=starting) as env:
            # The plan its check compiled, bound to the broker now that it is up (env.scenario adds
            # what the running broker asks of its clients: its login, its CA).
            plan = planning.bind_broker(planning.plan_of(scenario), env.url, env.scenario)
            if dask is None:
                _spread_source_addresses(plan)
            if routing is None:
                routing = check_routing(plan, followed=scenario.defaults_followed.get("subscribers.filters"))
            state = RunState(plan, run=directory.name, scenario=scenario.name, broker=env.broker.name, shard="all" if dask is None else "dask",
                             directory=directory, resources=env.sampler,
                             owed_per_message=routing.owed_per_message if not routing.unknown else None)
            if states is not None:
                states.append(state)
            header = f"mqttlab {VERSION}: {scenario.name} against {env.broker.name} at {env.url}\n{plan_line(plan, scenario.defaults_followed)}"
            try:
                with env.measuring(), (display or _no_display)(header, state) as show:
                    outcome = _execute(plan, _observed(state, show, env), env.url, dask, source_addresses, scenario.options.generator_cpus)
            except engine.BrokerUnreachable as error:
                raise LoadRefused(f"error: {error}", error.kind, error.reason) from None
            except engine.HostCannotRun as error:
                raise RunFailed(f"error: {error}", Exit.UNREACHABLE) from None
            except engine.PlanRejected as error:
                raise RunFailed(f"error: the engine rejected the plan (a bug in mqttlab, please report it): {error}", Exit.BAD_INPUT) from None
            env.add_sections(plan, outcome)
            broker_info = env.broker_info()
            gateway = env.gateway
        return _record(env.scenario, directory, plan, outcome, state, broker_info, gateway, env.sampler, routing,
                       started_at=started_at, command_line=command_line, allow_missing_shards=allow_missing_shards, distributed=dask is not None)


@contextmanager
def _failure_recorded(directory: Path) -> Iterator[None]:
    """Around a run: one that fails leaves its directory as `execute` says, except one that was
    measured and whose directory keeps what fitted (ResultsIncomplete)."""
    existed = directory.exists()
    try:
        yield
    except ResultsIncomplete:
        raise
    except BaseException as error:
        _never_started(directory, existed, error)
        raise


def _never_started(directory: Path, existed: bool, error: BaseException) -> None:
    import shutil

    from mqttlab.live.state import LIVE_FILE, read_live, write_live

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


def _record(scenario: Scenario, directory: Path, plan: engine.Plan, outcome: engine.RunOutcome, state: RunState,
            broker_info: results.BrokerInfo, gateway: Optional[RunningGateway], sampler: RunResources, routing: RoutingCheck, *,
            started_at: dt.datetime, command_line: Optional[str], allow_missing_shards: bool, distributed: bool) -> RunResult:
    """Writes the results directory of a run that was measured: manifest, scenario, plan,
    result, summary (with what the session adds), series, resources, capture table."""
    resources = _add_context(outcome, scenario, sampler, routing, broker_info)
    manifest = results.build_manifest(
        scenario_name=scenario.name,
        seed=scenario.load.seed,
        broker=broker_info,
        started_at=started_at,
        command_line=command_line or shlex.join(["mqttlab", *sys.argv[1:]]),
        status=outcome.status,
        mqttlab_version=VERSION,
        engine_version=engine.engine_version(),
        engine_commit=engine.engine_commit(),
    )
    for key in ("measurement", "network"):
        if key in outcome.summary:
            manifest[key] = outcome.summary[key]
    # Measured after the load, its broker stopped, once per process (mqttlab.calibration).
    manifest["calibration"] = calibration.measured() if not distributed else {
        "error": "not measured: the load ran on Dask workers, whose hosts' overhead this one's is not"}
    if distributed:
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
        measured = RunResult(directory, plan, outcome.result, typed(outcome.summary), manifest, Exit.ABNORMAL, outcome)
        raise ResultsIncomplete(f"error: {error}; the figures above were measured but not all kept", measured) from None
    state.finish(outcome.summary)
    return RunResult(directory, plan, outcome.result, typed(outcome.summary), manifest, _exit_code(outcome, allow_missing_shards), outcome)


def _mark_incomplete(directory: Path, state: RunState) -> None:
    """live.json says "incomplete", never "running", on a disk that may be full: the files
    written aside are removed first, then it is written in place; failing that, it is removed
    (a directory with summary.json and neither manifest nor live.json reads as incomplete)."""
    import json

    from mqttlab.live.state import LIVE_FILE

    for leftover in directory.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
    state.status = "incomplete"
    try:
        (directory / LIVE_FILE).write_text(json.dumps(state.to_dict()) + "\n", encoding="utf-8")
    except OSError:
        (directory / LIVE_FILE).unlink(missing_ok=True)


def _add_context(outcome: engine.RunOutcome, scenario: Scenario, sampler: RunResources, routing: RoutingCheck,
                 broker: results.BrokerInfo) -> Optional[dict[str, Any]]:
    """What the run adds to the engine's summary, each a section of its own (summary_types.add_section):
    the broker's and generator's resources, the routing check, the defaults the scenario followed,
    the protocol's promises about state judged against the broker's configured limits, the broker's
    memory per message of state it held. Returns the
    per-second resource rows (None before the measured window)."""
    series = None
    start = outcome.result.get("start_mono_ns")
    if start:
        series = sampler.series(int(start))
        add_section(outcome.summary, "resources", results.summarize_resources(series, outcome.summary.get("measured_s")))
        broker_sampler = sampler.samplers.get("broker")
        if broker_sampler is not None:
            held = state_memory(outcome.plan, outcome.result, broker_sampler.samples, broker_sampler.interval)
            if held is not None:
                add_section(outcome.summary, "state_memory", held)
    add_section(outcome.summary, "routing", routing.to_dict())
    if scenario.defaults_followed:
        add_section(outcome.summary, "defaults_followed", scenario.defaults_followed)
    config = broker.config or {}
    verdicts = promises.judge(outcome.plan, outcome.result, outcome.summary, config.get("state_limits"), config.get("restart_promises"), broker.name)
    if verdicts:
        add_section(outcome.summary, "promises", verdicts)
        outcome.summary["violations"] = restart_survival.without_explained(outcome.summary.get("violations") or [], verdicts)
    return series


def _no_display(header: str, state: RunState) -> AbstractContextManager[Optional[Progress]]:
    return nullcontext(None)


def _observed(state: RunState, show: Optional[Progress], env: RunEnvironment) -> Progress:
    """The progress callback: the fault timeline and the live state (file and metrics) first,
    then the display."""

    def observe(snapshot: dict[str, Any]) -> None:
        try:
            env.observe(snapshot)
            state.update(snapshot)
        except Exception:  # noqa: BLE001 — an exception here would stop the engine's run
            pass
        if show is not None:
            show(snapshot)

    return observe


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

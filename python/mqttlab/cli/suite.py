"""`mqttlab suite list|show|run`: built-in and user suites (docs/suites.md)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.text import Text

from mqttlab.exits import Exit

# Suites (and through them scenarios and pydantic) are imported by the commands that use them:
# `mqttlab --help` needs none of it.
if TYPE_CHECKING:
    from mqttlab.suite import PlannedRun, RunRecord
    from mqttlab.suite.model import Suite

app = typer.Typer(
    help="Suites: scenarios × variants × brokers × repetitions, run and compared.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)

BAD_INPUT, UNREACHABLE, INTERRUPTED, SOME_FAILED = Exit.BAD_INPUT, Exit.UNREACHABLE, Exit.INTERRUPTED, Exit.FINDINGS

SuiteArgument = Annotated[str, typer.Argument(help="A suite file, or the name of a built-in suite (see `mqttlab suite list`).", show_default=False)]
BrokersOption = Annotated[Optional[str], typer.Option("--brokers", "-b", help="Comma-separated brokers, replacing the suite's list: mosquitto,rumqttd; `all` = every broker available here")]
QuickOption = Annotated[bool, typer.Option("--quick", help="The suite's short version (its `quick:` settings).")]
SetOption = Annotated[Optional[list[str]], typer.Option("--set", help="Set a scenario field in every run: --set load.duration=30s (repeatable).")]
RepetitionsOption = Annotated[Optional[int], typer.Option("--repetitions", "-n", min=1, help="Repetitions of every combination, replacing the suite's.")]
ScenariosOption = Annotated[Optional[str], typer.Option("--scenarios", help="Comma-separated cases of the suite to run, e.g. p2p,fan-in (default: all).")]
OnlyOption = Annotated[Optional[list[str]], typer.Option("--only", help="Narrow a variant axis: --only rate=r200 or --only qos=qos1,qos2 (repeatable).")]


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def _load(suite_name: str, brokers: Optional[str], quick: bool, assignments: Optional[list[str]], repetitions: Optional[int],
          scenarios: Optional[str] = None, only: Optional[list[str]] = None) -> tuple[Suite, list[PlannedRun]]:
    from mqttlab.suite import SuiteError, expand_suite, load_suite

    broker_list = None
    if brokers is not None:
        broker_list = [name.strip() for name in brokers.split(",") if name.strip()]
        if broker_list == ["all"]:
            from mqttlab.brokers import available_launcher_names

            broker_list = available_launcher_names()
        if not broker_list:
            raise _fail("error: --brokers: give at least one broker, e.g. --brokers mosquitto,rumqttd", BAD_INPUT)
    try:
        suite = load_suite(suite_name)
        if broker_list is not None:
            suite = _with_brokers(suite, broker_list)
        runs = expand_suite(suite, quick=quick, assignments=assignments or (), repetitions=repetitions,
                            cases=_names(scenarios) if scenarios is not None else None, only=_only(only or []))
    except SuiteError as error:
        raise _fail(error.listing(), BAD_INPUT) from None
    return suite, runs


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _only(settings: list[str]) -> dict[str, list[str]]:
    narrowed: dict[str, list[str]] = {}
    for setting in settings:
        axis, sep, values = setting.partition("=")
        if not sep or not axis.strip() or not _names(values):
            raise _fail(f"error: --only {setting}: write AXIS=VALUE[,VALUE...], e.g. --only rate=r200", BAD_INPUT)
        narrowed.setdefault(axis.strip(), []).extend(_names(values))
    return narrowed


def _with_brokers(suite: Suite, brokers: list[str]) -> Suite:
    from mqttlab.suite import SuiteError, validate_suite

    data = suite.model_dump()
    data["brokers"] = brokers
    problems_source = f"{suite.source} with --brokers {','.join(brokers)}"
    try:
        return validate_suite(data, problems_source)
    except SuiteError as error:
        # Name the option, not the file, for a broker the user typed.
        raise SuiteError([type(p)(p.path.replace("brokers", "--brokers"), p.message) for p in error.problems], "command line") from None


@app.command("list")
def list_command() -> None:
    """List the built-in suites."""
    from rich.table import Table

    from mqttlab.suite import SuiteError, builtin_suites, expand_suite, load_suite

    table = Table(show_header=True, header_style="bold")
    table.add_column("suite")
    table.add_column("runs (quick)", justify="right")
    table.add_column("description")
    for name, path in builtin_suites().items():
        try:
            suite = load_suite(str(path))
            counts = f"{len(expand_suite(suite))} ({len(expand_suite(suite, quick=True))})"
            description = " ".join((suite.description or "").split())
        except SuiteError as error:
            counts, description = "–", f"invalid: {error.problems[0]}"
        table.add_row(name, counts, description)
    Console().print(table)


@app.command("show")
def show_command(
    suite_name: SuiteArgument,
    brokers: BrokersOption = None,
    quick: QuickOption = False,
    assignments: SetOption = None,
    repetitions: RepetitionsOption = None,
    scenarios: ScenariosOption = None,
    only: OnlyOption = None,
) -> None:
    """Validate a suite and list the runs it would make, in running order."""
    from rich.table import Table

    from mqttlab.suite.model import resolve_suite_path

    from mqttlab.live.state import format_seconds, scenario_load_s

    suite, runs = _load(suite_name, brokers, quick, assignments, repetitions, scenarios, only)
    _, skipped = _without_missing_brokers(runs)
    kept = [run for run in runs if run.broker not in skipped]
    console = Console()
    console.print(Text.assemble((suite.name, "bold"), f" ({resolve_suite_path(suite_name)}): {len(runs)} runs"
                                + (f", {len(runs) - len(kept)} of them skipped here" if skipped else "")))
    if suite.description:
        console.print(" ".join(suite.description.split()), style="dim", markup=False)
    for name, reason in skipped.items():
        console.print(f"skipped: {name}, not available here ({reason})", style="yellow", markup=False)
    table = Table(show_header=True, header_style="bold")
    for column in ("#", "scenario", "broker", "rep", "transport", "load"):
        table.add_column(column, overflow="fold")  # names in full, never cut to "…"
    for index, run in enumerate(runs, start=1):
        broker = run.broker + (" (skipped)" if run.broker in skipped else "")
        table.add_row(str(index), Text(run.scenario_name), Text(broker), str(run.repetition), run.transport, Text(_load_text(run)),
                      style="dim" if run.broker in skipped else None)
    console.print(table)
    seconds = [scenario_load_s(run.scenario) for run in kept]
    known = [value for value in seconds if value is not None]
    if known:
        console.print(f"time: about {format_seconds(sum(known))} of load for the {len(known)} runs made here"
                      + (f" ({len(seconds) - len(known)} unknown)" if len(known) < len(seconds) else "")
                      + ", plus each run's grace (load.grace) and broker start (a second to 15 s)", style="dim", markup=False)


def _load_text(run: PlannedRun) -> str:
    pubs = run.scenario.get("publishers") or {}
    subs = run.scenario.get("subscribers") or {}
    load = run.scenario.get("load") or {}
    amount = f"{pubs.get('messages')} msgs" if pubs.get("messages") else str(load.get("duration", "10s"))
    return f"{pubs.get('count', 10)}→{subs.get('count', 10)}, QoS {pubs.get('qos', 1)}, {_payload_text(pubs.get('payload', 64))}, {amount}"


def _payload_text(payload: Any) -> str:
    """64 -> "64 B"; "1KB" stays "1KB" (not "1KB B"); a distribution by its parameters."""
    if isinstance(payload, dict):
        return ", ".join(f"{key} {_payload_text(value) if key != 'dist' else value}" for key, value in payload.items())
    return f"{payload} B" if isinstance(payload, (int, float)) else str(payload)


@app.command("run")
def run_command(
    suite_name: SuiteArgument,
    brokers: BrokersOption = None,
    quick: QuickOption = False,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Suite directory. Default results/<suite>[-quick]/; the same directory resumes.")] = None,
    assignments: SetOption = None,
    repetitions: RepetitionsOption = None,
    scenarios: ScenariosOption = None,
    only: OnlyOption = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="Broker the comparison measures the others against. Default: the first broker.")] = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the comparison report at the end.")] = False,
    dask: Annotated[Optional[str], typer.Option("--dask", help="Run each run across a Dask cluster: tcp://SCHEDULER:8786, or local:N (one local cluster for the whole suite).")] = None,
    metrics: Annotated[Optional[str], typer.Option("--metrics", help="Serve live Prometheus/OpenMetrics metrics of the suite and its current run at HOST:PORT (docs/metrics.md).")] = None,
    metrics_linger: Annotated[str, typer.Option("--metrics-linger", help="Keep serving the final figures this long after the suite: one scrape interval.")] = "15s",
    strict: Annotated[bool, typer.Option("--strict", help="Refuse (exit 2) a suite with a run whose topics and filters leave something unmeasured.")] = False,
) -> None:
    """Run every combination of a suite (fresh broker per run); running it again resumes."""
    from mqttlab.results import record_invocation
    from mqttlab.suite import SuiteConflict, SuiteInterrupted, prepare_directory, run_suite
    from mqttlab.suite.runner import finished_status
    from mqttlab.suite.model import resolve_suite_path

    suite, runs = _load(suite_name, brokers, quick, assignments, repetitions, scenarios, only)
    _check_routing(runs, strict)
    if dask is not None:
        from mqttlab.distributed import BadClusterSpec, parse_spec

        try:
            parse_spec(dask)
        except BadClusterSpec as error:
            raise _fail(f"error: {error}", BAD_INPUT) from None
    suite_dir = out if out is not None else Path("results") / (f"{suite.name}-quick" if quick else suite.name)
    suite_text = resolve_suite_path(suite_name).read_text(encoding="utf-8")
    console = Console(stderr=True)
    runs, skipped = _without_missing_brokers(runs)
    for name, reason in skipped.items():
        console.print(f"note: {name} is skipped: not available here ({reason})", style="yellow", markup=False)
    if not runs:
        raise _fail("error: none of the suite's brokers is available here; `mqttlab brokers list` says how to get them", UNREACHABLE)
    try:
        prepare_directory(suite_dir, suite_text, runs)
        _record_skipped(suite_dir, skipped)
        # A resumed suite says how many of its runs it found finished and kept (not run again).
        kept = sum(finished_status(run.directory(suite_dir)) is not None for run in runs)
        record_invocation(suite_dir, runs=len(runs), **({"kept": kept} if kept else {}))
    except SuiteConflict as error:
        raise _fail(f"error: {error}", BAD_INPUT) from None
    except OSError as error:
        raise _fail(f"error: {suite_dir}: cannot write: {error}", BAD_INPUT) from None
    console.print(Text.assemble((suite.name, "bold"), f": {len(runs)} runs into {suite_dir}"))
    with ExitStack() as stack:
        if metrics or suite.metrics:
            _open_metrics(metrics or suite.metrics or "", metrics_linger, suite_dir, stack)
        scheduler = _open_cluster(dask, stack) if dask is not None else None
        try:
            records = run_suite(suite_dir, runs, report=lambda i, n, record: _print_progress(console, i, n, record, suite_dir), dask=scheduler,
                                started=lambda i, n, run: _print_start(console, i, n, run, suite_dir))
        except (SuiteInterrupted, KeyboardInterrupt):
            raise _fail(f"interrupted: run the same command again to resume ({suite_dir})", INTERRUPTED) from None
    failed = [record for record in records if record.status == "failed"]
    console.print(f"{len(records) - len(failed)} of {len(records)} runs finished; results in {suite_dir}", markup=False)
    for record in failed:
        console.print(f"  failed: {record.run.id}: {record.detail}", style="red", markup=False)
    if not no_report:
        # Without --baseline the first broker that ran is the baseline (the suite's first may be skipped).
        _write_report(console, suite_dir, baseline)
    if failed:
        raise typer.Exit(SOME_FAILED)


def _without_missing_brokers(runs: list[PlannedRun]) -> tuple[list[PlannedRun], dict[str, str]]:
    """The runs whose broker is available here, and each missing broker with the reason. The
    built-in suites list the seeds' brokers; those no registry here offers are skipped, not failed."""
    from mqttlab.brokers import get_launcher

    skipped: dict[str, str] = {}
    for name in dict.fromkeys(run.broker for run in runs):
        found = get_launcher(name).availability()
        if not found.available and name != "external" and "://" not in name:
            skipped[name] = found.detail
    return [run for run in runs if run.broker not in skipped], skipped


def _record_skipped(suite_dir: Path, skipped: dict[str, str]) -> None:
    import json

    from mqttlab.analysis.compare import SKIPPED_BROKERS

    path = suite_dir / SKIPPED_BROKERS
    if skipped:
        path.write_text(json.dumps([{"name": n, "reason": r} for n, r in skipped.items()], indent=2) + "\n", encoding="utf-8")
    else:
        path.unlink(missing_ok=True)


def _open_cluster(spec: str, stack: ExitStack) -> str:
    """The scheduler address every run gets; for local:N one local cluster kept up (and stopped
    on exit) for the whole suite instead of N workers started per run."""
    from mqttlab.distributed import SchedulerUnreachable, shared_scheduler

    try:
        return stack.enter_context(shared_scheduler(spec))
    except SchedulerUnreachable as error:
        raise _fail(f"error: {error}", UNREACHABLE) from None


def _check_routing(runs: list[PlannedRun], strict: bool) -> None:
    """Every run's topics against its filters before the first run: one warning per case (the
    repetitions and brokers of a case route alike), and with --strict none is started."""
    from mqttlab.planning import plan_of, validate_scenario
    from mqttlab.routing import check_routing
    from mqttlab.scenario import ScenarioError
    from mqttlab.summary_view import routing_panel

    console = Console(stderr=True)
    flagged, seen = [], set()
    for run in runs:
        key = (run.case, run.variants)
        if key in seen:
            continue
        seen.add(key)
        try:
            routing = check_routing(plan_of(validate_scenario(run.scenario)))
        except ScenarioError:
            continue  # expand_suite validated it already and said what is wrong
        if routing.warnings:
            flagged.append(run.id)
            console.print(f"{run.id}:", style="bold red", markup=False)
            console.print(routing_panel(routing.to_dict(), before=True))
    if flagged and strict:
        raise _fail(f"error: --strict: {len(flagged)} runs' topics and filters leave something unmeasured", BAD_INPUT)


def _open_metrics(address: str, linger: str, suite_dir: Path, stack: ExitStack) -> None:
    """The live metrics endpoint of the suite: its progress, and the run under way read from the
    live.json that run writes (the run is another process)."""
    from mqttlab.live.state import suite_state
    from mqttlab.live.metrics import MetricsError, MetricsServer
    from mqttlab.scenario.units import parse_duration

    def source() -> dict:
        state = suite_state(suite_dir)
        live = (state or {}).get("current_live")
        # The run's directory is named rep-N; the suite knows it by its id.
        return {"suite": state, "runs": [dict(live, run=state["current"])] if state is not None and live else []}

    try:
        server = MetricsServer(address, source, linger=parse_duration(linger)).start()
    except ValueError as error:
        raise _fail(f"error: --metrics-linger: {error}", BAD_INPUT) from None
    except MetricsError as error:
        raise _fail(f"error: {error}", BAD_INPUT) from None
    from mqttlab.cli.run import announced_linger

    url = f"http://{server.host}:{server.port}/metrics"
    Console(stderr=True).print(f"metrics: {url}", style="dim", highlight=False)
    stack.enter_context(announced_linger(server, url))  # the wait after the last run is said


def _time_left(suite_dir: Path) -> str:
    from mqttlab.live.state import format_seconds, suite_state

    state = suite_state(suite_dir)
    if not state or not state["left"]:
        return ""
    return f" · {state['left']} left, ~{format_seconds(state['left_s'])}" if state["left_s"] is not None else f" · {state['left']} left"


def _print_start(console: Console, index: int, total: int, run: PlannedRun, suite_dir: Path) -> None:
    console.print(f"[{index}/{total}] {run.id}: running{_time_left(suite_dir)}", style="dim", highlight=False)


def _print_progress(console: Console, index: int, total: int, record: RunRecord, suite_dir: Optional[Path] = None) -> None:
    where = f"[{index}/{total}] {record.run.id}"
    if record.resumed:
        console.print(f"{where}: {record.status} earlier, kept", style="dim", markup=False)
        return
    style = "green" if record.status == "completed" else "red"
    detail = f" ({record.detail})" if record.detail else ""
    left = _time_left(suite_dir) if suite_dir is not None else ""
    console.print(f"{where}: [{style}]{record.status}[/{style}] in {record.seconds:.1f} s{detail}{left}")


def _write_report(console: Console, suite_dir: Path, baseline: Optional[str]) -> None:
    from mqttlab.analysis import ComparisonError, compare_directories
    from mqttlab.analysis.compare import as_read
    from mqttlab.reproductions.section import attach_paper
    from mqttlab.reproductions.paper_file import PaperFileError
    from mqttlab.reproductions.paper_section import write_report_with_paper

    try:
        comparison = compare_directories([suite_dir], baseline=baseline)
    except ComparisonError as error:
        console.print(f"no comparison: {error}", style="yellow", markup=False)
        return
    try:
        # A seed's suite (suite.yaml names it) gets the paper's figures beside ours.
        attach_paper(comparison, [suite_dir])
    except PaperFileError as error:
        console.print(f"no paper section: {error}", style="yellow", markup=False)
    # As `compare` shows it: generator-limited runs left out of the figures, as the pages leave them.
    paths = write_report_with_paper(as_read(comparison), suite_dir / "report")
    console.print(f"report: {paths['html']}", markup=False)
    if "md:state" in paths:  # the state workloads' tables, as docs/state.md shows them
        console.print(f"state tables: {paths['md:state']}", markup=False)

"""`mqttlab capacity`: the highest offered rate a broker sustains under stated objectives, with
its bracket (mqttlab.capacity; docs/capacity.md). A thin shell: it validates every option at
once, runs the search per broker and prints what the search wrote."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterator, Optional

import typer
from rich.console import Console

from mqttlab import pacing
from mqttlab.exits import Exit

if TYPE_CHECKING:
    from mqttlab.capacity import CapacityReport, Probe

Text = Optional[str]


def capacity_command(
    scenario_file: Annotated[Optional[Path], typer.Argument(help="Scenario YAML whose shape is searched (its rate is the search's); none = the built-in default.", show_default=False)] = None,
    of: Annotated[str, typer.Option("--of", help="What is searched: messages (the publishers' offered msg/s), connect-rate (new connections per second, e.g. --slo 'connack.p99<50ms' --slo 'failed==0'; add --set launch.tls=true for TLS handshakes), connections (idle subscribers held, e.g. under --set launch.limits.memory=64MiB), queued-messages (messages held for offline sessions, e.g. --slo 'loss==0' --slo 'drain.p99<1s') or retained (retained messages set, then read, e.g. --slo 'loss==0' --slo 'retained.p99<1s').")] = "messages",
    slo: Annotated[Optional[list[str]], typer.Option("--slo", help="An objective every probe must meet (repeatable): 'p99<10ms', 'puback.p50<=2ms', 'p99.9<50ms', 'loss==0', 'delivered>=0.999', 'dropped==0'.")] = None,
    broker: Annotated[Text, typer.Option("--broker", "-b", help="A broker to launch (mosquitto, rumqttd, ...) or mqtt(s)://HOST:PORT. Default: the scenario's.")] = None,
    brokers: Annotated[Text, typer.Option("--brokers", help="Several brokers, comma-separated: one search each, compared on one figure and table.")] = None,
    assignments: Annotated[Optional[list[str]], typer.Option("--set", help="Set any scenario field: --set launch.limits.cpus=0.1 (repeatable).")] = None,
    pubs: Annotated[Optional[int], typer.Option("--pubs", "-P", help="Number of publishers (the offered rate is split between them).")] = None,
    subs: Annotated[Optional[int], typer.Option("--subs", "-S", help="Number of subscribers.")] = None,
    topic: Annotated[Text, typer.Option("--topic", "-t", help="Publish topic template.")] = None,
    filters: Annotated[Optional[list[str]], typer.Option("--filter", "-f", help="Subscription filter template (repeatable).")] = None,
    qos: Annotated[Optional[int], typer.Option("--qos", "-q", help="QoS of publishes and subscriptions.")] = None,
    size: Annotated[Text, typer.Option("--size", "-s", help="Payload size: 64, 1KB, 1KiB.")] = None,
    inflight: Annotated[Optional[int], typer.Option("--inflight", help="QoS>0 window per publisher.")] = None,
    start: Annotated[Optional[float], typer.Option("--start", help="Rate of the first probe (msg/s over all publishers; conn/s; connections). Default: the scenario's.")] = None,
    max_rate: Annotated[Optional[float], typer.Option("--max-rate", help="Highest rate probed. Default: 1024 x --start.")] = None,
    min_rate: Annotated[Optional[float], typer.Option("--min-rate", help="Lowest rate probed going down. Default: 1; for connect-rate, the rate that connects every client within 30 s.")] = None,
    factor: Annotated[float, typer.Option("--factor", help="Step of the bracketing ladder.")] = 2.0,
    repeats: Annotated[int, typer.Option("--repeats", help="Probes that must all meet the objectives at the capacity.")] = 3,
    resolution: Annotated[float, typer.Option("--resolution", help="Narrow until the bracket's upper end is within this share of its lower end.")] = 0.1,
    probe_duration: Annotated[str, typer.Option("--probe-duration", help="Each probe's load phase, warm-up included.")] = "5s",
    warmup: Annotated[str, typer.Option("--warmup", help="Each probe's warm-up, excluded from its figures (none in --of retained).")] = "1s",
    generator_retries: Annotated[int, typer.Option("--generator-retries", help="Repeats of a probe the generator limited before the search stops there.")] = 1,
    max_probes: Annotated[int, typer.Option("--max-probes", help="Probes at most, per broker.")] = 60,
    rerun_limited: Annotated[bool, typer.Option("--rerun-generator-limited", help="Resuming: run again the kept probes the generator limited (on a host quieter now).")] = False,
    verify: Annotated[int, typer.Option("--verify", help="Check a found capacity with this many probes at 0.9x and at 1.2x of it.")] = 0,
    dask: Annotated[Text, typer.Option("--dask", help="Run each probe across a Dask cluster: tcp://SCHEDULER:8786 or local:N.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="The search's directory; the same command again resumes it. Default: results/<time>-capacity-<scenario>/, a search from flags named by its shape (fan-in-20-1-qos1).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print capacity.json (comparison.json with --brokers) instead of text.")] = False,
) -> None:
    """Find the highest offered rate a broker sustains under the given objectives, with its bracket."""
    from mqttlab import session
    from mqttlab.capacity import ProbeSpec, SloError, parse_objectives, search_capacity, write_comparison
    from mqttlab.capacity.runner import with_rate_offered
    from mqttlab.capacity.search import Settings
    from mqttlab.cli.run import flag_overrides, name_by_shape
    from mqttlab.planning import load_scenario
    from mqttlab.scenario import ScenarioError

    problems: list[str] = []
    objectives = []
    if not slo:
        problems.append("--slo: at least one objective, such as --slo 'p99<10ms' --slo 'loss==0'")
    else:
        try:
            objectives = parse_objectives(slo)
        except SloError as error:
            problems.extend(error.problems)
    if broker and brokers:
        problems.append("--brokers: give either --broker or --brokers, not both")
    names = [name.strip() for name in (brokers or "").split(",") if name.strip()]
    if brokers is not None and not names:
        problems.append("--brokers: a comma-separated list of brokers, such as mosquitto,rumqttd")
    if len(set(names)) != len(names):
        problems.append("--brokers: a broker is named twice")
    knob = KNOBS.get(of)
    if knob is None:
        problems.append(f"--of: one of {', '.join(KNOBS)} (got {of!r})")
    overrides = flag_overrides(pubs=pubs, subs=subs, topic=topic, filters=filters, qos=qos, size=size, inflight=inflight)
    if knob == "retained.topics":
        warmup = "0s"  # nothing live is measured: the publishers set their values once, then the store is read
    if knob in SHAPES:
        overrides.update({k: v for k, v in SHAPES[knob].items() if k not in overrides})
        # The probes' own length (each probe sets it again): the reads and returns are checked against it.
        overrides.update({"load.duration": probe_duration, "load.warmup": warmup})
    elif knob not in (None, "publishers.rate"):
        overrides.update({k: v for k, v in CONNECTIONS_ONLY.items() if k not in overrides})
        if knob == "subscribers.count":
            # A connect rate the listen backlog keeps up with (all at once overflows it).
            overrides.setdefault("load.connect_rate", 1000)
    scenario = None
    try:
        scenario = load_scenario(scenario_file, overrides=overrides, assignments=assignments or ())
    except ScenarioError as error:
        problems.extend(str(problem) for problem in error.problems)
    probe_problems = _probe_problems(probe_duration, warmup)
    problems.extend(probe_problems)
    if min_rate is None:
        # Below it a connect-rate probe of N clients would spend minutes connecting them.
        slowest = scenario.publishers.count + scenario.subscribers.count if scenario is not None else 0
        min_rate = max(1.0, slowest / 30) if knob == "load.connect_rate" else 1.0
    held_per_rate = 1.0
    if scenario is not None and knob is not None:
        problems.extend(_shape_problems(scenario, knob, probe_duration))
        if knob == "offline.held":
            held_per_rate = _held_per_publisher_rate(scenario, session.routing_of(scenario).owed_per_message)
        first = start if start is not None else _scenario_start(scenario, knob, held_per_rate)
    else:
        # The scenario's rate is unknown: the search's own options are still checked.
        first = start if start is not None else max(min_rate, 1.0)
    settings = Settings(start=first, max_rate=max_rate if max_rate is not None else first * 1024, min_rate=min_rate, factor=factor,
                        repeats=repeats, resolution=resolution, generator_retries=generator_retries, max_probes=max_probes)
    problems.extend(settings.problems())
    if verify < 0:
        problems.append(f"--verify: 0 or more probes (got {verify})")
    if problems:
        count = len(problems)
        typer.echo("\n".join([f"capacity: {count} problem{'s' if count != 1 else ''}"] + [f"  {p}" for p in problems]), err=True)
        raise typer.Exit(int(Exit.BAD_INPUT))
    assert scenario is not None and knob is not None
    given = scenario.name
    name_by_shape(scenario, session.routing_of(scenario), scenario_file, assignments or [], paced=knob != "publishers.rate")
    if scenario.name != given:
        overrides["name"] = scenario.name  # the probes' runs carry it too
    targets = names or [broker or scenario.broker or "rumqttd"]
    root = out if out is not None else Path("results") / f"{dt.datetime.now():%Y%m%d-%H%M%S}-capacity-{scenario.name}"
    err = Console(stderr=True, highlight=False, markup=False)
    reports: list[CapacityReport] = []
    for name in targets:
        spec = ProbeSpec(scenario_file, {**overrides, "broker": name}, tuple(assignments or ()), scenario.publishers.count,
                         probe_duration, warmup, dask, knob, held_per_rate)
        directory = root / _directory_name(name) if len(targets) > 1 else root
        judged_by = with_rate_offered(spec, objectives)
        err.print(f"capacity of {name}: {', '.join(o.text for o in judged_by)}; probes in {directory}")
        with _searching():
            report = search_capacity(name, spec, objectives, settings, directory, on_probe=_printer(err, spec.unit),
                                     rerun_limited=rerun_limited, verify=verify)
        reports.append(report)
        if not as_json or len(targets) == 1:
            _print_report(report, as_json)
    if len(targets) > 1:
        comparison = write_comparison(reports, reports[0].objectives, root)
        if as_json:
            typer.echo(json.dumps(comparison, indent=2))
        else:
            _print_comparison(comparison, root)
    raise typer.Exit(int(Exit.OK if all(r.outcome.status == "bracketed" for r in reports) else Exit.FINDINGS))


@contextmanager
def _searching() -> Iterator[None]:
    """A search's failures as one line and an exit code; what it probed so far stays on disk."""
    from mqttlab.capacity import SearchConflict
    from mqttlab.session import RunFailed

    try:
        yield
    except SearchConflict as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(int(Exit.BAD_INPUT)) from None
    except RunFailed as error:
        typer.echo(f"{error} (the probes so far are kept; the same command resumes)", err=True)
        raise typer.Exit(int(error.code)) from None
    except KeyboardInterrupt:
        typer.echo("interrupted; the finished probes are kept and the same command resumes the search", err=True)
        raise typer.Exit(int(Exit.INTERRUPTED)) from None


def _printer(console: Console, unit: str) -> Callable[[Probe], None]:
    return lambda probe: console.print(probe_line(probe, unit))


def _directory_name(broker: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", broker).strip("_") or "broker"


def _probe_problems(duration: str, warmup: str) -> list[str]:
    from mqttlab.scenario.units import parse_duration

    found = []
    seconds = {}
    for flag, text in (("--probe-duration", duration), ("--warmup", warmup)):
        try:
            seconds[flag] = parse_duration(text)
        except ValueError as error:
            found.append(f"{flag}: {error}")
    if len(seconds) == 2 and not seconds["--warmup"] < seconds["--probe-duration"]:
        found.append(f"--warmup: must be shorter than --probe-duration ({duration}), got {warmup}")
    return found


KNOBS = {"messages": "publishers.rate", "connect-rate": "load.connect_rate", "connections": "subscribers.count",
         "queued-messages": "offline.held", "retained": "retained.topics"}
# The connection searches' clients, unless the flags or --set say otherwise: the subscribers hold
# idle connections (their filters match nothing sent); one publisher at 1 msg/s keeps the load
# phase (and the broker's CPU and memory sampling) going for the probe's duration, which a run
# without publishers would end at once.
CONNECTIONS_ONLY = {"publishers.count": 1, "publishers.rate": 1, "publishers.topic": "capacity/ping", "subscribers.filters": ["capacity/idle/%i"]}


# The state searches' shapes, unless the flags or --set say otherwise (docs/capacity.md, "State").
# Queued messages: every subscriber follows its publisher and leaves its persistent session at
# 1.5 s (after the 1 s warm-up) for 2 s while the publishers go on; 1 KiB payloads, so that a
# memory limit is reached at rates this host's generator offers; a window wide enough for them.
QUEUED_SHAPE: dict[str, Any] = {
    "mqtt.clean_start": False, "publishers.count": 5, "subscribers.count": 5, "publishers.topic": "queued/%i",
    "subscribers.filters": ["queued/%i"], "publishers.qos": 1, "publishers.payload": 1024, "publishers.inflight": 1000,
    "subscribers.offline": {"at": "1.5s", "duration": "2s"},
}
# Retained messages: one topic per publisher, each set once in the first half second (1 KiB), then
# two subscribers on a wildcard read the store at 1.5 s; the publishers connect at 2,000/s (all at
# once overflows the listen backlog).
RETAINED_SHAPE: dict[str, Any] = {
    "publishers.topic": "stored/%i", "publishers.retain": True, "publishers.messages": 1, "publishers.rate": 2, "publishers.qos": 1,
    "publishers.payload": 1024, "subscribers.count": 2, "subscribers.filters": ["stored/#"], "subscribers.retained": {"at": "1.5s"},
    "load.connect_rate": 2000,
}
SHAPES = {"offline.held": QUEUED_SHAPE, "retained.topics": RETAINED_SHAPE}


def _held_per_publisher_rate(scenario: Any, owed_per_message: float) -> float:
    """Messages held for the offline sessions per msg/s of each publisher: every publisher's sends
    while the subscribers are away, times the subscribers owed each (all away at once)."""
    offline = scenario.subscribers.offline
    if offline is None:
        return 1.0
    return max(scenario.publishers.count * offline.duration * owed_per_message, 1e-9)


def _scenario_start(scenario: Any, knob: str, held_per_rate: float = 1.0) -> float:
    """Where the search starts by default: the scenario's own rate (or count)."""
    if knob == "publishers.rate":
        return float(scenario.publishers.count * (scenario.publishers.rate or 0))
    if knob == "offline.held":
        return float(round(held_per_rate * (scenario.publishers.rate or 1)))
    if knob == "retained.topics":
        return float(scenario.publishers.count)
    if knob == "load.connect_rate":
        return float(scenario.load.connect_rate or 100)
    return float(scenario.subscribers.count or 100)


def _shape_problems(scenario: Any, knob: str, probe_duration: str = "5s") -> list[str]:
    """A scenario the search cannot set its rate on."""
    found = []
    p = scenario.publishers
    if knob == "offline.held":
        found.extend(_queued_problems(scenario, probe_duration))
    if knob == "retained.topics" and scenario.subscribers.retained is None:
        found.append("subscribers.retained: the retained search reads the store; give it a time (--set subscribers.retained.at=1.5s)")
    if knob in ("publishers.rate", "offline.held"):
        if p.count < 1:
            found.append("publishers.count: the search offers a rate, so it needs at least one publisher")
        if not pacing.mode_of(p.arrival).scheduled:
            found.append(f"publishers.arrival: {p.arrival} has no offered rate to search; use {pacing.SCHEDULED}")
    elif scenario.subscribers.count < 1 and knob == "load.connect_rate":
        found.append("subscribers.count: the connect-rate search opens the subscribers; give --subs N (1,000 or more measures a rate)")
    if p.messages is not None and knob != "retained.topics":
        found.append("publishers.messages: a probe runs for --probe-duration; leave the message count out")
    if scenario.faults:
        found.append("faults: a capacity probe measures the broker undisturbed; leave the faults out")
    return found


def _queued_problems(scenario: Any, probe_duration: str) -> list[str]:
    """What the queued-messages search needs: every subscriber away at once, once, and back before
    the probe ends."""
    from mqttlab.scenario.units import parse_duration

    offline = scenario.subscribers.offline
    if offline is None:
        return ["subscribers.offline: the queued-messages search needs the subscribers away (--set subscribers.offline.at=1.5s ...)"]
    found = []
    if offline.fraction != 1:
        found.append(f"subscribers.offline.fraction: the queued-messages search holds every subscriber away at once; leave it 1 (got {offline.fraction:g})")
    if offline.every is not None:
        found.append("subscribers.offline.every: the queued-messages search holds the sessions away once; leave it out")
    try:
        duration = parse_duration(probe_duration)
    except ValueError:
        return found  # named by the probe's own check
    if offline.at + offline.duration >= duration:
        found.append(f"subscribers.offline: the sessions must be back before the probe ends (at {offline.at:g} s + {offline.duration:g} s "
                     f">= --probe-duration {probe_duration})")
    return found


def probe_line(probe: Probe, unit: str = "msg/s") -> str:
    from mqttlab.capacity.slo import describe
    from mqttlab.environment import host_load

    if probe.refused:
        verdict = f"broke: the broker refused the load ({probe.summary.get('error')})"
    elif probe.generator_limited:
        blamed = "host contention" if host_load.contention(probe.summary, probe.host) else "generator-limited"
        verdict = f"{blamed} (judges nothing): " + "; ".join(probe.summary.get("generator_limited_reasons") or [])
    else:
        verdict = ("met" if probe.met else f"broke ({probe.summary.get('status')})" if not probe.completed else "broke") + ": " + \
            "; ".join(describe(check) for check in probe.checks)
    return (f"  probe {probe.rate:g}{' ' + unit if unit else ''} #{probe.attempt}{' (kept)' if probe.reused else ''}: {verdict}"
            + (f"; host {host_load.busy_cores(probe.host)}" if probe.host.get("busy_cores") is not None else ""))


def _print_report(report: CapacityReport, as_json: bool) -> None:
    data = report.to_dict()
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    console = Console(highlight=False, markup=False)
    console.print(data["headline"], style="bold")
    if data["rule"]:
        console.print(f"rule: {data['rule']}")
    for name, end in data["ends"].items():
        low, high = end["pass_probability"]
        console.print(f"  {name} end {end['rate']:g} {data['unit']}: {end['met']} of {end['probes']} probes met the objectives"
                      + (f" (probability a probe there meets them: {low:.2f}-{high:.2f}, {end['confidence']:.0%} Clopper-Pearson)" if low is not None else ""))
    for item in data["limited_by"]:
        console.print(f"  limited by {item['limit']}: {item['detail']}")
    for check in data["verification"]:
        console.print(f"  check at {check['factor']:g}x ({check['rate']:g} {data['unit']}): {check['met']} of {check['probes']} probes met the objectives, "
                      f"{check['broke']} broke one" + (f", {check['generator_limited']} generator-limited" if check["generator_limited"] else ""))
    if data["verified"] is False:
        console.print("  not verified: the probes at 0.9x did not all meet the objectives, or none at 1.2x broke them; "
                      "the boundary moves more than the bracket on this host now (busy host, or a broker whose knee is not sharp)")
    if data["generator"]["go_further"]:
        for reason in data["generator"]["reasons"]:
            console.print(f"  generator: {reason}")
        console.print(f"  {data['generator']['go_further']}")
    if data["host_busy_cores"]:
        console.print(f"  host CPU while probing: {data['host_busy_cores']['mean']:.2f} cores busy on average, "
                      f"{data['host_busy_cores']['max']:.2f} at most (every process: others' load disturbs the figures)")
    console.print(f"  {report.directory / 'capacity.json'}, curve.csv, curve.png")


def _print_comparison(comparison: dict[str, Any], root: Path) -> None:
    from rich.table import Table

    table = Table(title="capacity by broker")
    unit = comparison["unit"]
    for column in ("broker", f"capacity {unit}", f"bracket {unit}", "status", "limited by"):
        table.add_column(column)
    for row in comparison["brokers"]:
        low, high = row["interval_per_s"]
        table.add_row(row["broker"], f"{row['capacity_per_s']:g}" if row["capacity_per_s"] is not None else "-",
                      f"[{low if low is not None else '-'}, {high if high is not None else 'open'}]", row["status"], row["limited_by"] or "")
    console = Console(highlight=False, markup=False)
    console.print(table)
    for difference in comparison["differences"]:
        console.print(difference["statement"])
    console.print(f"test: {comparison['test']}")
    console.print(f"{root / 'comparison.json'}, curves.csv, curves.png")


def storm_command(
    scenario_file: Annotated[Optional[Path], typer.Argument(help="Scenario YAML for the rest (TLS, payload, MQTT version...); none = the built-in default.", show_default=False)] = None,
    broker: Annotated[Text, typer.Option("--broker", "-b", help="A broker to launch (mosquitto, rumqttd, ...); broker-restart needs one mqttlab launches.")] = None,
    clients: Annotated[int, typer.Option("--clients", help="Connections: half publishers, half subscribers (each following its publisher).")] = 1000,
    fault: Annotated[Text, typer.Option("--fault", help="clients-disconnect (every connection reset at once; the default) or broker-restart (killed, then started again).")] = None,
    persistent: Annotated[bool, typer.Option("--persistent", help="Persistent sessions: every subscriber leaves its session (DISCONNECT) at --at and all come back at once after --away, into their sessions and the messages queued meanwhile (MQTT 5: with a session expiry); instead of --fault.")] = False,
    away: Annotated[Text, typer.Option("--away", help="--persistent: how long the subscribers stay away while the publishers go on (default 2s).")] = None,
    down: Annotated[str, typer.Option("--down", help="broker-restart: how long the broker stays down.")] = "1s",
    at: Annotated[str, typer.Option("--at", help="When the storm starts, from the start of the load (warm-up 1 s included).")] = "4s",
    duration: Annotated[Optional[str], typer.Option("--duration", help="The whole load phase. Default: --at + 8 s + 5 ms per client, room for everyone to come back.")] = None,
    rate: Annotated[float, typer.Option("--rate", help="Messages per second per publisher.")] = 1.0,
    qos: Annotated[int, typer.Option("--qos", help="QoS of publishes and subscriptions: the promise the losses are judged against.")] = 1,
    assignments: Annotated[Optional[list[str]], typer.Option("--set", help="Set any scenario field (repeatable).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Directory for storm.json and the run's results (run/). Default: results/<time>-storm-<broker>/.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print storm.json instead of text.")] = False,
) -> None:
    """A reconnect storm: every client dropped at once, then all reconnecting; time until all are back, CONNACK latency, sessions, losses.
    With --persistent: the subscribers' return into their sessions; sessions resumed and queued messages delivered, judged."""
    from mqttlab.capacity.storm import broken_promises, run_storm, session_expiry_assignment, storm_assignments, storm_lines
    from mqttlab.planning import load_scenario
    from mqttlab.scenario import ScenarioError
    from mqttlab.scenario.units import parse_duration
    from mqttlab.session import RunFailed

    problems = []
    if persistent and fault is not None:
        problems.append("--fault: not with --persistent (that storm is the subscribers' return into their sessions, no fault)")
    if not persistent and away is not None:
        problems.append("--away: only with --persistent")
    fault = fault or "clients-disconnect"
    if fault not in ("clients-disconnect", "broker-restart"):
        problems.append(f"--fault: clients-disconnect or broker-restart (got {fault!r})")
    if clients < 2:
        problems.append(f"--clients: at least 2, a publisher and a subscriber (got {clients})")
    seconds = {}
    timings = [("--down", down), ("--at", at)] + ([("--away", away or "2s")] if persistent else [])
    for flag, text in timings:
        try:
            seconds[flag] = parse_duration(text)
        except ValueError as error:
            problems.append(f"{flag}: {error}")
    if duration is None:
        # Room for everyone to come back (and, persistent, the time away first).
        duration = f"{seconds.get('--at', 4.0) + seconds.get('--away', 0.0) + 8 + 0.005 * clients:.0f}s"
    try:
        seconds["--duration"] = parse_duration(duration)
    except ValueError as error:
        problems.append(f"--duration: {error}")
    if len(seconds) == len(timings) + 1:
        if not 1 < seconds["--at"] < seconds["--duration"]:
            problems.append(f"--at: after the 1 s warm-up and before --duration ({duration}), got {at}")
        elif persistent and seconds["--at"] + seconds["--away"] >= seconds["--duration"]:
            problems.append(f"--away: the subscribers must be back before the load ends (--at {at} + --away {away or '2s'} >= --duration {duration})")
    scenario = None
    if len(seconds) == len(timings) + 1:
        extra = storm_assignments(clients, fault, seconds["--at"], seconds["--down"], rate, qos, seconds["--duration"],
                                  away_s=seconds["--away"] if persistent else None)
        overrides = {"broker": broker} if broker else {}
        try:
            if persistent:  # the user's MQTT version decides whether the sessions need an expiry
                user = load_scenario(scenario_file, overrides=overrides, assignments=list(assignments or ()))
                extra += session_expiry_assignment(user, seconds["--duration"])
            scenario = load_scenario(scenario_file, overrides=overrides, assignments=[*extra, *(assignments or ())])
        except ScenarioError as error:
            problems.extend(str(problem) for problem in error.problems)
    if problems:
        count = len(problems)
        typer.echo("\n".join([f"storm: {count} problem{'s' if count != 1 else ''}"] + [f"  {p}" for p in problems]), err=True)
        raise typer.Exit(int(Exit.BAD_INPUT))
    assert scenario is not None
    name = _directory_name(scenario.broker or "rumqttd")
    directory = out if out is not None else Path("results") / f"{dt.datetime.now():%Y%m%d-%H%M%S}-storm-{name}"
    storm = f"subscribers away {away or '2s'} from" if persistent else fault
    Console(stderr=True, highlight=False, markup=False).print(f"storm on {scenario.broker or 'rumqttd'}: {clients} clients, {storm} {at}; into {directory}")
    try:
        report = run_storm(scenario, directory)
    except RunFailed as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(int(error.code)) from None
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        console = Console(highlight=False, markup=False)
        for line in storm_lines(report):
            console.print(line)
        console.print(f"{directory / 'storm.json'}, run/")
    raise typer.Exit(int(Exit.OK if report["all_back"] and report["status"] == "completed" and not broken_promises(report) else Exit.FINDINGS))


def standard_command(
    broker: Annotated[Text, typer.Option("--broker", "-b", help="A broker to launch (mosquitto, rumqttd, ...) or mqtt(s)://HOST:PORT.")] = None,
    scale: Annotated[float, typer.Option("--scale", help="Multiplies every family's client counts (p2p 10, fan-in 20, fan-out 20, shared 10/5, connections 1,000 at 1).")] = 1.0,
    family: Annotated[Optional[list[str]], typer.Option("--family", help="Only these families (repeatable): p2p, fan-in, fan-out, shared, connections.")] = None,
    slo: Annotated[Optional[list[str]], typer.Option("--slo", help="Objectives of the message families (repeatable). Default: p99<50ms, loss==0, dropped==0; connections: failed==0, connack.p99<200ms.")] = None,
    fraction: Annotated[float, typer.Option("--fraction", help="Latency is reported at this fraction of each capacity.")] = 0.5,
    quick: Annotated[bool, typer.Option("--quick", help="A short pass: 2 s probes, one probe at the capacity, a coarse 50% resolution.")] = False,
    repeats: Annotated[int, typer.Option("--repeats", help="Probes that must all meet the objectives at a capacity.")] = 3,
    resolution: Annotated[float, typer.Option("--resolution", help="Narrow each bracket to this share.")] = 0.1,
    probe_duration: Annotated[str, typer.Option("--probe-duration", help="Each probe's load phase, warm-up included.")] = "5s",
    warmup: Annotated[str, typer.Option("--warmup", help="Each probe's warm-up.")] = "1s",
    max_probes: Annotated[int, typer.Option("--max-probes", help="Probes at most, per family.")] = 40,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Directory (one search per family inside); the same command again resumes. Default: results/<time>-standard-<broker>/.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print standard.json instead of a table.")] = False,
) -> None:
    """The field's standard scenarios, scaled to this host: each one's capacity to a stated SLO and its latency at a fraction of it."""
    from mqttlab.capacity import SloError, parse_objectives
    from mqttlab.capacity.search import Settings
    from mqttlab.capacity.standard import FAMILIES, STANDARD_FILE, families, run_standard

    if quick:
        repeats, resolution, probe_duration, warmup, max_probes = 1, 0.5, "2s", "0.5s", min(max_probes, 12)
    problems = []
    chosen = tuple(family or FAMILIES)
    unknown = [name for name in chosen if name not in FAMILIES]
    if unknown:
        problems.append(f"--family: {', '.join(unknown)} unknown; one of {', '.join(FAMILIES)}")
    if not scale > 0:
        problems.append(f"--scale: above 0 (got {scale:g})")
    if not 0 < fraction <= 1:
        problems.append(f"--fraction: in (0, 1] (got {fraction:g})")
    if slo:
        try:
            parse_objectives(slo)
        except SloError as error:
            problems.extend(error.problems)
    problems.extend(_probe_problems(probe_duration, warmup))
    settings = Settings(start=1.0, max_rate=1024.0, repeats=repeats, resolution=resolution, max_probes=max_probes)
    problems.extend(p for p in settings.problems() if not p.startswith(("--start", "--max-rate", "--min-rate")))
    if problems:
        count = len(problems)
        typer.echo("\n".join([f"standard: {count} problem{'s' if count != 1 else ''}"] + [f"  {p}" for p in problems]), err=True)
        raise typer.Exit(int(Exit.BAD_INPUT))
    name = broker or "rumqttd"
    directory = out if out is not None else Path("results") / f"{dt.datetime.now():%Y%m%d-%H%M%S}-standard-{_directory_name(name)}"
    err = Console(stderr=True, highlight=False, markup=False)
    err.print(f"standard scenarios on {name} at scale {scale:g}; into {directory}")
    with _searching():
        rows = run_standard(name, families(scale, chosen if not unknown else FAMILIES), settings, directory, probe_duration, warmup, fraction,
                            message_slos=slo, on_probe=lambda family, probe: err.print(f"  {family.name}: {probe_line(probe, '').lstrip()}"),
                            on_family=lambda f, report: err.print(report.headline()))
    if as_json:
        typer.echo((directory / STANDARD_FILE).read_text(encoding="utf-8"))
    else:
        _print_standard(rows, fraction, directory)
    clean = all(row["status"] == "bracketed" and (row.get("at_fraction") or {}).get("met", True) for row in rows)
    raise typer.Exit(int(Exit.OK if clean else Exit.FINDINGS))


def _print_standard(rows: list[dict[str, Any]], fraction: float, directory: Path) -> None:
    console = Console(highlight=False, markup=False, soft_wrap=True)
    for row in rows:
        low, high = row["interval"]
        line = f"{row['scenario']} ({', '.join(row['slo'])}): {row['status']}"
        if row["capacity"] is not None:
            line += f", capacity {row['capacity']:g} {row['unit']}, bracket [{low:g}, {high:g}]" if high is not None else f", capacity above {low:g} {row['unit']}"
        at = row.get("at_fraction")
        if at and at.get("e2e_p50_us") is not None:
            line += (f"; at {fraction:.0%} ({at['rate']:g} {row['unit']}): e2e p50 {at['e2e_p50_us'] / 1000:.2f} ms, p99 {at['e2e_p99_us'] / 1000:.2f} ms"
                     + (" (generator-limited)" if at["generator_limited"] else ""))
        if at and not at["met"] and not at["generator_limited"]:
            # The search's probes met the SLO up to the capacity, yet a lower rate broke it: the
            # capacity is not a clean one, and the line must not read as if it were.
            line += (f"\n  its own probe at {fraction:.0%} broke the SLO ({'; '.join(at['broken'] or ['the run did not complete'])}): "
                     "this capacity is not clean")
        console.print(line)
    console.print(f"{directory / 'standard.json'}; one search per scenario inside")

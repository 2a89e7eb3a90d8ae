"""The end-of-run summary as rich tables, the same whether it comes from a fresh run or from disk."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mqttlab import restart_survival, state_memory
from mqttlab.environment import host_load
from mqttlab.summary_text import counted, followed_line, measurement_line, ms

LATENCY_ROWS = (
    ("e2e", "e2e"),
    ("e2e_uncorrected", "e2e uncorrected"),
    ("e2e_client", "e2e uncorrected at read"),
    ("e2e_queued", "e2e held offline"),
    ("puback", "→ PUBACK"),
    ("pubcomp", "→ PUBCOMP"),
    ("connect", "TCP connect"),
    ("tls", "TLS handshake"),
    ("websocket", "WebSocket upgrade"),
    ("connack", "→ CONNACK"),
    ("suback", "→ SUBACK"),
    ("rtt", "round trip"),
    ("churn_connack", "churn → CONNACK"),
    ("churn_suback", "churn → SUBACK"),
    ("churn_unsuback", "churn → UNSUBACK"),
    ("takeover", "takeover → old closed"),
)
LATENCY_COLUMNS = (("p50_us", "p50"), ("p90_us", "p90"), ("p99_us", "p99"), ("p999_us", "p99.9"), ("max_us", "max"))
MESSAGE_ROWS = ("sent", "acked", "dropped", "received", "expected", "delivered", "lost", "duplicated", "out_of_order", "unexpected")
STATUS_STYLE = {"completed": "bold green", "interrupted": "bold yellow", "broker_lost": "bold red", "failed": "bold red"}


# A send is counted late (generator.late_sends) when it left more than this after its intended
# time: the engine's threshold (sending.rs). The generator-limited flag judges the p99 lag
# against 2 ms instead (summary.rs), a different question: whether lateness was the rule.
LATE_SEND_MS = 1.0

# Below this many measured messages, percentiles are a handful of values (p99 of 50 is their
# maximum) and per-message and per-second figures swing with a single message.
FEW_SAMPLES = 100


def render_summary(summary: Mapping[str, Any], results_path: Optional[str] = None,
                   host: Optional[Mapping[str, Any]] = None) -> RenderableType:
    """`host`: the host's CPU load while the run went (environment/host_load.py), when it was kept."""
    parts: list[RenderableType] = [_headline(summary)]
    if (summary.get("routing") or {}).get("warnings"):
        parts.append(routing_panel(summary["routing"]))
    if summary.get("generator_limited"):
        held_back = host_load.contention(summary, host or {})
        parts.append(_contention_warning(summary, host or {}) if held_back else _generator_limited_warning(summary))
    parts += [_messages_table(summary), _latency_table(summary)]
    few = _few_samples_warning(summary)
    if few is not None:
        parts.append(few)
    for key, title in (("violations", "Violations"), ("errors", "Errors")):
        issues = summary.get(key) or []
        if issues:
            parts.append(_issues_table(title, issues, "detail" if key == "violations" else "example"))
    if summary.get("reason_codes"):
        parts.append(_reason_codes_table(summary["reason_codes"]))
    if summary.get("broker_limits"):
        parts.append(_broker_limits_line(summary["broker_limits"]))
    if summary.get("churn"):
        parts.append(_churn_line(summary["churn"]))
    if summary.get("takeover"):
        parts.append(_takeover_line(summary["takeover"]))
    for split in summary.get("shared_groups") or []:
        parts.append(_shared_group_line(split))
    if summary.get("round_trip"):
        parts.append(_round_trip_line(summary["round_trip"]))
    if summary.get("offline"):
        parts.append(_offline_lines(summary["offline"], summary.get("promises") or []))
    if summary.get("retained"):
        parts.append(_retained_lines(summary["retained"], summary.get("promises") or []))
    for kind, entry in (summary.get("state_memory") or {}).items():
        parts.append(_state_memory_line(kind, entry))
    if summary.get("wills"):
        parts.append(_will_lines(summary, summary.get("promises") or []))
    restart = [v for v in summary.get("promises") or [] if v["name"].startswith("restart_")]
    if restart:
        parts.append(_restart_lines(restart))
    parts.append(_generator_line(summary))
    back_pressure = _back_pressure_line(summary)
    if back_pressure is not None:
        parts.append(back_pressure)
    resources = _resources_line(summary)
    if resources is not None:
        parts.append(resources)
    if host and host.get("busy_cores") is not None:
        parts.append(Text.assemble(("host: ", "dim"), f"{host_load.busy_cores(host)} while the run went "
                                   "(every process: the broker's, mqttlab's and others')"))
    if summary.get("distributed"):
        parts.append(_distributed_lines(summary["distributed"]))
    if results_path:
        parts.append(Text.assemble(("results: ", "dim"), (str(results_path), "bold")))
    return Group(*parts)


def print_summary(console: Console, summary: Mapping[str, Any], results_path: Optional[str] = None,
                  host: Optional[Mapping[str, Any]] = None) -> None:
    console.print(render_summary(summary, results_path, host))


def _headline(summary: Mapping[str, Any]) -> Text:
    status = str(summary.get("status", "unknown"))
    text = Text.assemble(("status: ", "dim"), (status, STATUS_STYLE.get(status, "bold")))
    measured, warmup = summary.get("measured_s"), summary.get("warmup_s")
    if measured is not None:
        text.append(f"   measured {measured:.1f} s")
    if warmup:
        text.append(f" after {warmup:g} s of warm-up; rates and latencies exclude it, message counts cover the whole run", style="dim")
    method = measurement_line(summary.get("measurement"))
    if method:
        text.append(f"\n{method}", style="dim")
    followed = followed_line(summary.get("defaults_followed"))
    if followed:
        text.append(f"\n{followed}", style="dim")
    if summary.get("error"):
        text.append(f"\nerror: {summary['error']}", style="red")
    return text


def routing_panel(routing: Mapping[str, Any], before: bool = False) -> Panel:
    """The routing warnings with the publishers' topics and the subscribers' filters side by side."""
    body = Table.grid(padding=(0, 3))
    body.add_column()
    body.add_column()
    body.add_row(Text("publishers publish to", style="bold"), Text("subscribers subscribe to", style="bold"))
    topics, filters = list(dict.fromkeys(routing.get("topics") or [])), list(dict.fromkeys(routing.get("filters") or []))
    for k in range(max(len(topics), len(filters))):
        # Topics and filters are the user's text: brackets in them are not markup.
        body.add_row(Text(topics[k] if k < len(topics) else ""), Text(filters[k] if k < len(filters) else ""))
    lines = Text()
    for warning in routing.get("warnings") or []:
        lines.append(f"• {warning}\n", style="bold")
    hint = ("give the subscribers matching filters (--filter / subscribers.filters) or the publishers a matching topic; "
            "--strict refuses such runs") if before else "the delivery figures below cover only what was owed"
    title = "TOPICS AND FILTERS DO NOT MEET" + (" (before the load)" if before else "")
    return Panel(Group(lines, body, Text(hint, style="dim")), title=title, border_style="bold red", expand=False)


def _generator_limited_warning(summary: Mapping[str, Any]) -> Panel:
    reasons = summary.get("generator_limited_reasons") or []
    body = Text("The load generator could not keep its schedule: these figures describe mqttlab's limits, not the broker's.\n", style="bold")
    for reason in reasons:
        body.append(f"• {reason}\n")
    return Panel(body, title="GENERATOR-LIMITED", border_style="bold red", expand=False)


def _contention_warning(summary: Mapping[str, Any], host: Mapping[str, Any]) -> Panel:
    thread = summary["generator"]["max_thread_cpu_share"]
    body = Text(f"The load generator fell behind its schedule with CPU to spare (its busiest thread used {thread:.0%} of a core) "
                f"while the host had {host_load.busy_cores(host)}, {host_load.others_cores(summary, host):.2f} of them by processes "
                "other than the generator and the broker: they kept it waiting. These figures describe this host's contention, "
                "neither the broker nor mqttlab; run again on a quieter host.\n", style="bold")
    for reason in summary.get("generator_limited_reasons") or []:
        body.append(f"• {reason}\n")
    return Panel(body, title="HOST CONTENTION", border_style="bold red", expand=False)


def _messages_table(summary: Mapping[str, Any]) -> Table:
    messages = summary.get("messages") or {}
    rates = summary.get("rates") or {}
    connections = summary.get("connections") or {}
    table = Table(title="Messages", title_justify="left", show_header=True, header_style="bold")
    table.add_column("count")
    table.add_column("value", justify="right")
    for key in MESSAGE_ROWS:
        if key in messages:
            value = messages[key]
            bad = key in ("lost", "duplicated", "out_of_order", "unexpected", "dropped") and value
            table.add_row(key.replace("_", " "), Text(f"{value:,}", style="bold red" if bad else ""))
    if messages.get("retained"):
        # Retained messages the broker held before the run: received, but owed by no send of it.
        table.add_row("retained (stored before, in received)", f"{messages['retained']:,}")
    if messages.get("late"):
        table.add_row("late (past the deadline, in lost)", Text(f"{messages['late']:,}", style="bold red"))
    for verdict in summary.get("promises") or []:
        if verdict.get("dropped_by_limit"):
            # Not delivered, but under a queue limit the broker was configured with: not loss.
            table.add_row(f"dropped by limit {verdict['limit']:,} (in lost)", Text(f"{verdict['dropped_by_limit']:,}", style="yellow"))
    if messages.get("dropped_receive_maximum"):
        # MQTT 5 flow control: the broker allows fewer in flight than the plan's window.
        table.add_row("at the broker's receive maximum (in dropped)", Text(f"{messages['dropped_receive_maximum']:,}", style="yellow"))
    if messages.get("unmeasured"):
        table.add_row("unmeasured (send record gone)", Text(f"{messages['unmeasured']:,}", style="yellow"))
    if messages.get("completion_timeouts"):
        table.add_row("closed loop: given up", Text(f"{messages['completion_timeouts']:,}", style="yellow"))
    if messages.get("retransmitted"):
        # MQTT-SN only, and only when it happened: resends after Tretry are UDP recovering (not a
        # finding), but they explain latencies of a Tretry and the extra bytes.
        table.add_row("retransmitted (Tretry)", Text(f"{messages['retransmitted']:,}", style="yellow"))
    if messages.get("out_of_order_resent"):
        # Of out_of_order: messages sent again over UDP, arriving after a later one (not a violation).
        table.add_row("out of order after a resend (UDP)", Text(f"{messages['out_of_order_resent']:,}", style="yellow"))
    for key, label in (("sent_per_s", "sent / s"), ("acked_per_s", "acked / s"), ("received_per_s", "received / s")):
        if rates.get(key) is not None:
            table.add_row(label, f"{rates[key]:,.1f}")
    for role in ("publishers", "subscribers"):
        counts = connections.get(role)
        if counts:
            failed = counts.get("failed", 0)
            table.add_row(
                f"{role} connected",
                Text(f"{counts.get('ok', 0)} ok, {failed} failed", style="bold red" if failed else ""),
            )
    return table


def _stamp_note(summary: Mapping[str, Any]) -> str:
    """Where the actual send and a reception were timed (the engine's send_stamp.rs and rx_stamp.rs)."""
    measurement = summary.get("measurement") or {}
    note = ""
    counts = measurement.get("send_stamps")
    if measurement.get("send_stamp") == "kernel" and counts:
        note += (f"; sends when their PUBLISH left the host's stack (kernel stamps; {counts['client']:,} of "
                 f"{counts['kernel'] + counts['client']:,} deliveries from the engine's stamp, the kernel's not yet read)")
    elif measurement.get("send_stamp_why"):
        note += f"; sends at the engine's stamp before its write ({measurement['send_stamp_why']})"
    elif measurement:
        note += "; sends at the engine's stamp before its write"
    stamp = measurement.get("receive_stamp")
    if stamp == "kernel":
        note += "; receptions at their arrival in the kernel (a read's messages at its last segment's); at read: both as the engine saw them"
    if stamp == "client":
        note += "; receptions when the engine's thread read them (no kernel timestamps on this transport)"
    return note


def _latency_table(summary: Mapping[str, Any]) -> Table:
    latency = summary.get("latency") or {}
    table = Table(
        title="Latency (ms)",
        title_justify="left",
        header_style="bold",
        caption="e2e counts from the intended send time (no coordinated omission); uncorrected from the actual send" + _stamp_note(summary),
        caption_justify="left",
    )
    table.add_column("measure")
    table.add_column("count", justify="right")
    for _, label in LATENCY_COLUMNS:
        table.add_column(label, justify="right")
    for name, label in LATENCY_ROWS:
        stats = latency.get(name)
        if not stats or not stats.get("count"):
            continue
        table.add_row(label, f"{stats['count']:,}", *(ms(stats.get(key)) for key, _ in LATENCY_COLUMNS))
    return table


def _few_samples_warning(summary: Mapping[str, Any]) -> Optional[Text]:
    """Figures from too few messages to mean anything, said under the table that shows them."""
    e2e = (summary.get("latency") or {}).get("e2e") or {}
    count = e2e.get("count")
    if not count or count >= FEW_SAMPLES:
        return None
    return Text(f"only {counted(count, 'message')} measured: too few for the percentiles (p99 needs at least {FEW_SAMPLES}; "
                "here the high ones are the slowest message or two), the per-message CPU and the rates per second; "
                "run longer (--duration) or faster (--rate, --pubs)", style="yellow")


def _churn_line(churn: Mapping[str, Any]) -> Text:
    """The churning clients' counts (their latencies are in the table)."""
    failed, taken = churn["failed"], churn.get("taken_over", 0)
    return Text.assemble(("churn: ", "dim"), f"{churn['opened']:,} connections opened ({churn['rate_per_s']:,.1f}/s of "
                         f"{churn['planned_rate_per_s']:,g} planned), {churn['completed']:,} went through to their leaving, ",
                         (f"{taken:,} taken over by another visit on their id (visits overlapping: few ids for the rate and stay, or a slow broker), "
                          if taken else "", "yellow"),
                         (f"{failed:,} failed to connect", "bold red" if failed else ""))


def _takeover_line(t: Mapping[str, Any]) -> Text:
    """Session takeover: the broker must close the old connection (MQTT 3.1.1 §3.1.4-2, 5 §3.1.4-3);
    the session's continuity is judged by session_lost and the pairs' accounting."""
    kept, failed = t["old_kept"], t["failed"]
    return Text.assemble(
        ("takeover: ", "dim"), f"{t['taken_over']:,} sessions taken over by a second connection ({t['session_present']:,} with session present); "
        f"the broker closed the old connection in {t['old_closed']:,} within {t['close_limit_s']:g} s of the new CONNACK, ",
        (f"kept it open in {kept:,}", "bold red" if kept else ""),
        f" (rule: it must close it); DISCONNECT 0x8E Session taken over on {t['disconnect_taken_over']:,}",
        (f"; {failed:,} second connections failed" if failed else "", "bold red" if failed else ""))


def _shared_group_line(split: Mapping[str, Any]) -> Text:
    """A shared group's messages over its members: the most and the least a member got, beside an
    even split (MQTT promises each message to one member, not an even split)."""
    even = 1 / split["members"] if split["members"] else 0.0
    return Text.assemble(("shared group ", "dim"), split["group"].removeprefix("share:"),
                         f": {split['delivered']:,} messages over {split['members']} members, most {split['most']:,} "
                         f"({split['most_share']:.0%}), least {split['least']:,} ({split['least_share']:.0%}); an even split is {even:.0%} each")


def _reason_codes_table(codes: list[Mapping[str, Any]]) -> Table:
    """The broker's answers that were not a plain success, by packet and code."""
    table = Table(title="Reason codes from the broker", title_justify="left", header_style="bold")
    for column in ("packet", "code", "name", "count"):
        table.add_column(column, justify="right" if column == "count" else "left")
    for c in codes:
        refusal = c["code"] >= 0x80
        table.add_row(c["packet"], f"0x{c['code']:02x}", Text(c["name"], style="bold red" if refusal else ""), f"{c['count']:,}")
    return table


# The CONNACK properties in the order a reader looks for them.
BROKER_LIMITS = (
    ("receive_maximum", "receive maximum"),
    ("maximum_qos", "maximum QoS"),
    ("maximum_packet_size", "maximum packet"),
    ("topic_alias_maximum", "topic aliases"),
    ("retain_available", "retain"),
    ("wildcard_subscription_available", "wildcards"),
    ("shared_subscription_available", "shared subscriptions"),
    ("subscription_identifiers_available", "subscription ids"),
    ("server_keep_alive", "server keep-alive"),
    ("session_expiry_interval", "session expiry"),
)


def _broker_limits_line(limits: Mapping[str, Any]) -> Text:
    """What the broker announced in its MQTT 5 CONNACK; what it left out is the spec's default."""
    parts = []
    for key, label in BROKER_LIMITS:
        value = limits.get(key)
        if isinstance(value, bool):
            parts.append(f"{label} {'yes' if value else 'no'}")
        elif value is not None:
            parts.append(f"{label} {value:,}")
    said = ", ".join(parts) + "; the rest the spec's defaults" if parts else "nothing: the spec's defaults"
    return Text.assemble(("broker announced (CONNACK): ", "dim"), said)


def _issues_table(title: str, issues: list[Mapping[str, Any]], text_key: str) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold red")
    table.add_column("kind")
    table.add_column("count", justify="right")
    table.add_column(text_key)
    for issue in issues:
        table.add_row(Text(str(issue.get("kind"))), f"{issue.get('count', 0):,}", Text(str(issue.get(text_key) or "")))
    return table


def _generator_line(summary: Mapping[str, Any]) -> Text:
    generator = summary.get("generator") or {}
    text = Text("generator: ", style="dim")
    per_msg = generator.get("cpu_per_msg_us")
    text.append(f"{per_msg:.2f} µs CPU per message" if per_msg is not None else "CPU per message unknown")
    if generator.get("schedule_lag_p99_us") is not None:
        text.append(f", schedule lag p99 {ms(generator['schedule_lag_p99_us'])} ms")
    if generator.get("late_sends"):
        text.append(f", {counted(generator['late_sends'], 'late send')} (left over {LATE_SEND_MS:g} ms after their intended time)", style="yellow")
    submission = generator.get("submission")
    if submission == "io_uring":
        text.append(f", io_uring: {generator['sends_per_submission']:.1f} sends per submission, "
                    f"at most {ms(generator['submission_wait_max_us'])} ms after their stamp")
    elif submission and submission != "write":
        text.append(f", {submission}", style="yellow")
    return text


# A broker that left the load's bytes unread for more than this share of the publishers'
# connection-time set the pace (it judges the broker, never the generator).
BACK_PRESSURE_SHARE = 0.01


def _back_pressure_line(summary: Mapping[str, Any]) -> Optional[Text]:
    generator = summary.get("generator") or {}
    share = generator.get("back_pressure_share") or 0.0
    if share < BACK_PRESSURE_SHARE:
        return None
    return Text.assemble(("broker back-pressure: ", "bold yellow"),
                         f"the broker left the publishers' bytes unread {share:.0%} of their connection time "
                         f"({generator.get('socket_full_s', 0):.2f} s in all): the broker, not the generator, set the pace then")


def _resources_line(summary: Mapping[str, Any]) -> Optional[Text]:
    """CPU (cores) and memory of the broker's process tree and of the generator, measured window."""
    resources = summary.get("resources") or {}
    parts = []
    for role in ("broker", "generator"):
        figures = resources.get(role) or {}
        if figures.get("mean_cpu_share") is None:
            continue
        rss = figures.get("peak_rss_bytes")
        parts.append(f"{role} {figures['mean_cpu_share']:.2f} cores mean, {figures.get('max_cpu_share') or 0:.2f} peak"
                     + (f", {rss / 1e6:.1f} MB peak RSS" if rss is not None else ""))
    if not resources:
        return None
    if not parts:
        parts.append("none sampled (sampled once a second: the measured window was too short)")
    elif (resources.get("broker") or {}).get("mean_cpu_share") is None:
        parts.append("broker not sampled (a broker given by URL: add ?pid=PID, or &container=NAME, to its URL)")
    return Text.assemble(("resources: ", "dim"), "; ".join(parts))


def broker_line(broker: Mapping[str, Any]) -> Optional[Text]:
    """How a launched broker was configured and limited, and whether its limits bit (from the
    manifest's broker entry); None for a broker given by URL."""
    config, limits = broker.get("config") or {}, broker.get("limits") or {}
    if not config and not limits:
        return None
    text = Text("broker: ", style="dim")
    text.append(f"{broker.get('version') or broker.get('name')}, config {config.get('mode', 'unknown')}")
    if config.get("file"):
        text.append(f" ({config['file']})")
    if limits:
        bounds = [f"{limits['cpus']:g} CPU" if limits.get("cpus") is not None else "",
                  f"CPUs {limits['cpuset']}" if limits.get("cpuset") is not None else "",
                  f"{limits['memory_bytes'] / 2**20:.0f} MiB" if limits.get("memory_bytes") is not None else ""]
        text.append(f"; cgroup {limits.get('cgroup')} limits {', '.join(b for b in bounds if b)}")
        throttled, periods = limits.get("throttled_periods"), limits.get("periods")
        if throttled:
            text.append(f"; CPU throttled in {throttled:,} of {periods:,} periods ({limits.get('throttled_seconds') or 0:.1f} s)", style="yellow")
        if limits.get("oom_kills"):
            text.append(f"; {limits['oom_kills']} OOM kills", style="bold red")
        elif limits.get("memory_limit_hits"):
            text.append(f"; memory limit reached {limits['memory_limit_hits']:,} times", style="yellow")
    return text


def _round_trip_line(counts: Mapping[str, Any]) -> Text:
    text = Text("round trips: ", style="dim")
    text.append(f"{counts.get('sent', 0):,} sent, {counts.get('replies', 0):,} replies")
    for key in ("lost", "duplicated"):
        value = counts.get(key, 0)
        text.append(f", {value:,} {key}", style="bold red" if value else "")
    return text


def _offline_lines(offline: Mapping[str, Any], verdicts: list[Mapping[str, Any]]) -> Text:
    """Offline sessions: what was owed while away and how it drained, then each promise with its
    rule and verdict (mqttlab.promises)."""
    text = Text("offline sessions: ", style="dim")
    text.append(f"{offline['subscribers']:,} subscribers, {offline['periods']:,} periods away, {offline['returned']:,} back; "
                f"{offline['delivered']:,} of {offline['owed']:,} messages owed while away delivered")
    if offline.get("earlier"):
        text.append(f" (+{offline['earlier']:,} sent before leaving)")
    if offline.get("expired"):
        text.append(f", {offline['expired']:,} expired while away (message expiry: not owed)")
    for key, label, unit in (("drain_s", "drain", "s"), ("drain_rate_per_s", "drain rate", " msg/s")):
        spread = offline.get(key)
        if spread:
            text.append(f"; {label} p50 {spread['p50']:.3g}{unit}, p99 {spread['p99']:.3g}{unit} over {spread['count']:,}")
    _append_verdicts(text, [v for v in verdicts if v["name"] in ("session_lost", "queued_lost")])
    return text


def _retained_lines(retained: Mapping[str, Any], verdicts: list[Mapping[str, Any]]) -> Text:
    """A retained read: what the subscribers got from the store and how fast, then its promises."""
    text = Text("retained read: ", style="dim")
    text.append(f"{retained['subscribers']:,} subscribers got {retained['delivered']:,} of {retained['expected']:,} retained values "
                f"({retained['complete']:,} complete)")
    if retained.get("deleted"):
        text.append(f"; {retained['deleted']:,} deleted topics owed nothing, {retained['not_deleted']:,} messages got for them")
    for key, label in (("first_s", "SUBSCRIBE → first"), ("all_s", "SUBSCRIBE → all")):
        spread = retained.get(key)
        if spread:
            text.append(f"; {label} p50 {ms(spread['p50'] * 1e6)} ms, p99 {ms(spread['p99'] * 1e6)} ms")
    _append_verdicts(text, [v for v in verdicts if v["name"] in ("retained_missing", "stale_retained", "retained_unflagged", "retained_not_deleted")])
    return text


def _state_memory_line(kind: str, entry: Mapping[str, Any]) -> Text:
    """The broker's memory per message of the state it held, with its rule (mqttlab.state_memory)."""
    text = Text("  ", style="dim")
    text.append(state_memory.describe(kind, entry))
    text.append(f"\n    rule: {entry['rule']}", style="dim")
    return text


def _will_lines(summary: Mapping[str, Any], verdicts: list[Mapping[str, Any]]) -> Text:
    """Wills: the exits, the wills owed and got, the time from an exit to its will, then the promises."""
    wills, latency = summary["wills"], (summary.get("latency") or {}).get("will")
    text = Text("wills: ", style="dim")
    text.append(f"{wills['exits']:,} publishers left ({wills['graceful']:,} with DISCONNECT); {wills['delivered']:,} of {wills['expected']:,} wills owed delivered")
    if latency and latency.get("count"):
        text.append(f"; exit → will p50 {ms(latency['p50_us'])} ms, p99 {ms(latency['p99_us'])} ms")
    _append_verdicts(text, [v for v in verdicts if v["name"].startswith("will_")])
    return text


def _restart_lines(verdicts: list[Mapping[str, Any]]) -> Text:
    """What survived the broker's restart, each with the broker's promise and its verdict
    (mqttlab.restart_survival)."""
    text = Text("survives restart:", style="dim")
    for verdict in verdicts:
        style = {"broken": "bold red", "kept": "green"}.get(verdict["verdict"], "yellow")
        text.append("\n  " + restart_survival.line(verdict) + ": ")
        text.append(verdict["verdict"] + (f" ({verdict['name']} {verdict['broken']:,})" if verdict["broken"] else ""), style=style)
        text.append(f"\n    rule: {verdict['rule']}; broker: {verdict['source']}", style="dim")
    return text


def _append_verdicts(text: Text, verdicts: list[Mapping[str, Any]]) -> None:
    for verdict in verdicts:
        style = {"broken": "bold red", "kept": "green"}.get(verdict["verdict"], "yellow")
        text.append("\n  " + verdict["promise"] + ": ", style="dim")
        text.append(verdict["verdict"], style=style)
        counts = f" (kept {verdict['kept']:,}"
        if verdict.get("broken"):
            counts += f", {verdict['name']} {verdict['broken']:,}"
        if verdict.get("dropped_by_limit"):
            counts += f", dropped by limit {verdict['limit']:,}: {verdict['dropped_by_limit']:,}"
        if verdict.get("expired"):
            counts += f", expired as asked {verdict['expired']:,}"
        text.append(counts + ")")
        text.append(f"\n    rule: {verdict['rule']}; broker: {verdict['allowed']}", style="dim")


def _distributed_lines(section: Mapping[str, Any]) -> Text:
    """Where the shards ran, each host's share of clients, and which clock the latencies rest on."""
    shards = section.get("shards") or []
    share: dict[str, list[int]] = {}
    for shard in shards:
        (a, b), (c, d) = shard.get("publishers", (0, 0)), shard.get("subscribers", (0, 0))
        counts = share.setdefault(str(shard.get("host")), [0, 0, 0])
        counts[0] += 1
        counts[1] += b - a
        counts[2] += d - c
    text = Text(f"distributed: {counted(len(shards), 'shard')} on {counted(len(share), 'host')}", style="dim")
    for host, (n, pubs, subs) in share.items():
        text.append(f"\n  {host}: {counted(n, 'shard')}, {counted(pubs, 'publisher')}, {counted(subs, 'subscriber')}", style="dim")
    clock = section.get("latency_clock") or {}
    if clock:
        text.append(f"\n  latency clock: {clock.get('basis')}", style="dim")
        if clock.get("note"):
            text.append(f" ({clock['note']})", style="dim" if clock.get("basis") == "shared" else "yellow")
    missing = section.get("missing_shards") or []
    if missing:
        text.append(f"\n  missing shards: {', '.join(str(i) for i in missing)}", style="bold red")
    return text

"""A broker's feature probe: the broker brought up once (launched by name or image, with its TLS
and WebSocket listeners where its launcher has them, or reached at a URL), then each feature of
features/checks.py checked by a tiny real run through the session (a handful of messages, a
second or two), judged by its rule."""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from mqttlab import session
from mqttlab.exits import LoadRefused, RunFailed
from mqttlab.features.checks import FEATURES, Feature, Finding, Measured
from mqttlab.planning import load_scenario
from mqttlab.scenario.fields import is_url

#: the base run every check changes: 2 publishers x 5 QoS 1 messages at 20 msg/s to 2 subscribers
#: of the probe's topics; a broker that does not answer a CONNECT in 3 s refuses the feature
BASE_SETTINGS: Mapping[str, Any] = {
    "publishers.count": 2, "subscribers.count": 2, "publishers.qos": 1, "publishers.rate": 20, "publishers.messages": 5,
    "publishers.topic": "{t}/%i", "subscribers.filters": ["{t}/#"], "load.grace": "1s", "mqtt.connect_timeout": "3s",
}  # fmt: skip
BASE_TEXT = ("each run: 2 publishers send 5 QoS 1 messages each at 20 msg/s on P/%i to 2 subscribers of P/# (P: the probe's own "
             "topic prefix), unless its feature says otherwise")
#: connect failures that mean nothing answers at the address: a probe of it stops at the first check
NOTHING_THERE = ("refused", "unreachable", "dns")


class ProbeUnreachable(Exception):
    """Nothing serves MQTT at the probed address; the message is the one-line reason."""


class ProbeCannotStart(Exception):
    """The broker could not be launched; the message is the one-line reason."""


@dataclass
class BrokerProbe:
    """One broker's probe: its version and configuration, why it could not be probed (None when
    it was), and the findings, one per feature probed, in FEATURES order."""

    target: str
    name: str
    version: Optional[str]
    configuration: str
    problem: Optional[str] = None
    findings: list[tuple[Feature, Finding]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "name": self.name, "version": self.version, "configuration": self.configuration, "problem": self.problem,
            "features": [{"key": f.key, "feature": f.name, "result": r.result, "reason": r.reason, "evidence": r.evidence, "rule": f.rule}
                         for f, r in self.findings],
        }  # fmt: skip


@dataclass(frozen=True)
class Reach:
    """Where the checks' clients connect, per listener, and what they need to."""

    plain: str
    mqtt5: str
    tls: Optional[str] = None
    ca_file: Optional[str] = None
    websocket: Optional[str] = None
    credentials: Optional[tuple[str, str]] = None
    by_url: bool = False


def select(keys: Iterable[str]) -> list[Feature]:
    """The features of these keys in FEATURES order (all for none); a ValueError names every
    unknown key and the known ones."""
    wanted = [key.strip() for key in keys if key.strip()]
    unknown = [key for key in wanted if key not in {f.key for f in FEATURES}]
    if unknown:
        raise ValueError(f"unknown feature{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; known: {', '.join(f.key for f in FEATURES)}")
    return [f for f in FEATURES if not wanted or f.key in wanted]


def probe(target: str, features: Optional[list[Feature]] = None, *, on_finding: Optional[Callable[[Feature, Finding], None]] = None) -> BrokerProbe:
    """Probes the broker `target` names (a launcher's name, image:REF, or an mqtt:// URL) for
    `features` (default: all), each finding also given to `on_finding` as it is made. Raises
    ProbeCannotStart when a broker to launch cannot start, ProbeUnreachable when nothing answers
    at a URL."""
    chosen = list(FEATURES) if features is None else features
    with tempfile.TemporaryDirectory(prefix="mqttlab-probe-") as work, _brought_up(target, Path(work)) as (found, reach):
        token = secrets.token_hex(3)  # the probe's own topics and client ids: nothing left from another probe is read
        for index, entry in enumerate(chosen):
            finding = _check(entry, reach, Path(work) / f"{index:02d}-{entry.key}", f"{token}-{index:02d}")
            found.findings.append((entry, finding))
            if on_finding is not None:
                on_finding(entry, finding)
    return found


@contextmanager
def _brought_up(target: str, work: Path) -> Iterator[tuple[BrokerProbe, Reach]]:
    """The broker up (a launched one stopped on exit), described, and where to reach it."""
    from mqttlab.brokers import BrokerError, UnknownBroker, get_launcher

    if is_url(target):
        url = target.split("?", 1)[0]
        yield BrokerProbe(target, target, None, "as run at that address (not known here)"), Reach(url, url, by_url=True)
        return
    try:
        launcher = get_launcher(target)
    except UnknownBroker as error:
        raise ValueError(str(error)) from None
    launcher.websocket = launcher.has_websocket
    listeners = ["TCP"] + (["TLS"] if launcher.has_tls else []) + (["WebSocket"] if launcher.has_websocket else [])
    try:
        broker = launcher.start(work / "broker", tls=launcher.has_tls)
    except BrokerError as error:
        raise ProbeCannotStart(f"cannot start {launcher.name or target}: {str(error).splitlines()[0]}") from None
    with broker:
        configuration = f"{launcher.config.mode}; {', '.join(listeners)} listener{'s' if len(listeners) > 1 else ''}"
        reach = Reach(
            plain=broker.url(), mqtt5=f"mqtt://{broker.host}:{broker.v5_port}" if broker.v5_port else broker.url(),
            tls=broker.url(tls=True) if broker.tls_port else None, ca_file=str(broker.ca_file) if broker.ca_file else None,
            websocket=broker.url(websocket=True) if broker.ws_port else None, credentials=broker.credentials,
        )  # fmt: skip
        yield BrokerProbe(target, broker.name, broker.version, configuration), reach


def _check(entry: Feature, reach: Reach, directory: Path, tag: str) -> Finding:
    """One feature's run, judged; a listener the broker was not given is not probed."""
    settings = _settings(entry, reach, tag)
    if isinstance(settings, Finding):
        return settings
    scenario = load_scenario(None, overrides=settings)
    try:
        result = session.execute(scenario, directory)
    except LoadRefused as error:
        if reach.by_url and error.kind in NOTHING_THERE:
            raise ProbeUnreachable(str(error).removeprefix("error: ")) from None
        return entry.judge(Measured(None, refusal=error.reason.split("; ")[0]))
    except RunFailed as error:
        return Finding("broken", f"the run failed: {str(error).removeprefix('error: ')}", "no summary")
    return entry.judge(Measured(result.summary))


def _settings(entry: Feature, reach: Reach, tag: str) -> dict[str, Any] | Finding:
    """The check's scenario fields, bound to the broker's listener; a Finding when that listener
    is not there."""
    settings = {**BASE_SETTINGS, **entry.settings}
    if entry.listener == "plain":
        broker = reach.mqtt5 if settings.get("mqtt.version") == 5 else reach.plain
    elif reach.by_url:
        return Finding("not probed", f"a broker given by URL is probed at that URL only, not on its {entry.name} listener", "-")
    elif entry.listener == "tls":
        if reach.tls is None:
            return Finding("not probed", "mqttlab launches this broker without a TLS listener", "-")
        broker = reach.tls
        settings["tls.ca"] = reach.ca_file
    else:
        if reach.websocket is None:
            return Finding("not probed", "mqttlab launches this broker without a WebSocket listener", "-")
        broker = reach.websocket
    settings["broker"] = broker
    if reach.credentials is not None:
        settings["mqtt.username"], settings["mqtt.password"] = reach.credentials
    prefix = f"mqttlab-probe/{tag}"
    settings["publishers.client_id"] = f"{tag}-p%i"
    settings["subscribers.client_id"] = f"{tag}-s%i"
    return {key: _with_prefix(value, prefix) for key, value in settings.items()}


def _with_prefix(value: Any, prefix: str) -> Any:
    """`{t}` in a setting's strings (in lists and mappings too) replaced by the probe's topic prefix."""
    if isinstance(value, str):
        return value.replace("{t}", prefix)
    if isinstance(value, list):
        return [_with_prefix(item, prefix) for item in value]
    if isinstance(value, dict):
        return {key: _with_prefix(item, prefix) for key, item in value.items()}
    return value

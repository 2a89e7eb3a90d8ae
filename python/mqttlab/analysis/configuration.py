"""What a run was configured to do, as a grouping key: the run's resolved scenario (scenario.yaml in
its results directory) flattened to dotted fields, without what identifies the run rather than its
configuration. Two runs may be averaged together only when these fields are equal; a figure that
sweeps an axis leaves that axis (and the field drawn as separate lines) out of the key.

Left out, and why:
- the scenario's name and description: a suite encodes its case and variants in the name, and a
  name says nothing a configuration field does not; `--set` or a manual `compare` of directories
  can give one name to different configurations, which the key must still tell apart;
- `load.seed`: repetitions may be seeded differently and are still repetitions;
- the broker URL and credentials: the host, port and PID change with every launch (the broker's
  name and configuration are the comparison's broker label); only the scheme (TLS or not) is kept;
- TLS file paths: a suite writes a fresh CA per launch; whether a CA, certificate and key were
  given is kept;
- `launch`: the broker's configuration and limits are in the broker label already."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Optional

IDENTITY_FIELDS = ("name", "description", "load.seed", "launch", "mqtt.username", "mqtt.password")
TLS_FILES = ("tls.ca", "tls.cert", "tls.key")

Configuration = dict[str, Any]


def configuration(scenario: Mapping[str, Any], without: Iterable[str] = ()) -> Configuration:
    """The run's configuration fields (dotted path -> value) without identity fields and
    without the fields (or whole sections) named in `without`."""
    flat = _flatten(scenario)
    broker = flat.pop("broker", None)
    # A suite's emulated-network runs ask for TLS with `launch.tls`, the others with an mqtts:// URL.
    flat["transport.tls"] = bool(flat.get("launch.tls")) or bool(broker and str(broker).startswith(("mqtts://", "ssl://", "wss://")))
    # MQTT over WebSocket is another transport: its runs are never averaged with plain MQTT's.
    flat["transport.websocket"] = bool(flat.get("launch.websocket")) or bool(broker and str(broker).startswith(("ws://", "wss://")))
    for name in TLS_FILES:
        if name in flat:
            flat[name] = flat[name] is not None
    dropped = (*IDENTITY_FIELDS, *without)
    return {key: value for key, value in flat.items() if not any(_under(key, prefix) for prefix in dropped)}


def configuration_key(scenario: Mapping[str, Any], without: Iterable[str] = ()) -> str:
    """A hashable, order-independent form of `configuration`."""
    return json.dumps(configuration(scenario, without), sort_keys=True, default=str)


def differing_fields(configurations: Iterable[Configuration]) -> list[str]:
    """The fields that tell `configurations` apart (sorted): those with different values, and
    those some configurations have and others lack. A section given in some runs and absent
    (null) in others, such as `network`, shows as the section itself and as its fields that say
    something; its fields left at an empty or automatic value (`method: auto`, `reorder: false`)
    add nothing to its presence and are left out."""
    configurations = list(configurations)
    if len(configurations) < 2:
        return []
    keys = sorted({key for config in configurations for key in config})
    fields = []
    for key in keys:
        present = [config[key] for config in configurations if key in config]
        values = {json.dumps(value, sort_keys=True, default=str) for value in present}
        if len(values) > 1:
            fields.append(key)
        elif len(present) < len(configurations):
            marker = present[0] is None and any(k.startswith(key + ".") for config in configurations for k in config)
            if marker or present[0] not in (None, False, 0, "", "auto", [], {}):
                fields.append(key)
    return fields


def describe(config: Configuration, fields: Iterable[str]) -> str:
    """`field=value, ...` for those of `fields` the configuration has: the label that tells it
    apart from the others."""
    return ", ".join(f"{_short(field)}={_text(config[field])}" for field in fields if field in config)


def _short(field: str) -> str:
    # `publishers.payload.size` says no more than `payload.size` in a label.
    return field.removeprefix("publishers.") if field.startswith("publishers.payload") else field


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _under(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + ".")


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def scenario_value(scenario: Mapping[str, Any], path: str, default: Optional[Any] = None) -> Any:
    """The value at a dotted path of a resolved scenario, or `default`."""
    current: Any = scenario
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return default
        current = current[part]
    return current

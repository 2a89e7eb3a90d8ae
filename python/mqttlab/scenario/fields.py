"""Field types of a scenario: durations, sizes, MQTT topics and filters, name templates.

Each validator raises PydanticCustomError with the whole sentence the user will read, so the
error listing needs no rewording (see errors.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, NamedTuple, Optional
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, PlainSerializer, StringConstraints, ValidationInfo, WithJsonSchema
from pydantic_core import PydanticCustomError

from mqttlab.scenario.units import format_duration, parse_duration, parse_size

# MQTT's Remaining Length caps a packet at 256 MiB; leave room for the topic and properties.
MAX_PAYLOAD = 256 * 1024 * 1024 - 64 * 1024


def _problem(message: str) -> PydanticCustomError:
    return PydanticCustomError("mqttlab", message)


def _duration(value: object) -> float:
    try:
        return parse_duration(value)
    except ValueError as error:
        raise _problem(str(error)) from None


def _size(value: object) -> int:
    try:
        return parse_size(value)
    except ValueError as error:
        raise _problem(str(error)) from None


def _byte_amount(value: object) -> object:
    # Means and deviations of payload distributions may be fractional, or spelled like sizes.
    return float(_size(value)) if isinstance(value, str) else value


Duration = Annotated[
    float,
    BeforeValidator(_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0, "description": "seconds"},
                {"type": "string", "pattern": r"^\s*(\d+(\.\d+)?\s*(us|µs|ms|s|m|h)\s*)+$"},
            ],
            "description": 'A duration: seconds, or "250ms", "10s", "2m", "1h", "1m30s".',
        }
    ),
]

def _whole_seconds(seconds: float) -> float:
    # The protocol carries these in whole seconds; rounding silently would change the test.
    if not float(seconds).is_integer():
        raise _problem(f"must be a whole number of seconds (got {seconds}s)")
    return seconds


# A duration MQTT carries in whole seconds (keep-alive, expiry intervals).
WholeSeconds = Annotated[Duration, AfterValidator(_whole_seconds)]

Size = Annotated[
    int,
    BeforeValidator(_size),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*([kKmMgG][iI]?[bB]|[bB])?\s*$"},
            ],
            "description": 'Bytes: an integer, or "64B", "1KB" (1000), "1KiB" (1024), "1MB", "1MiB".',
        }
    ),
]

ByteAmount = Annotated[
    float,
    BeforeValidator(_byte_amount),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}], "description": "Bytes, may be fractional."}),
]


def _mqtt_version(value: object) -> object:
    # "3" is MQTT 3.1.1 (protocol level 4), as in emqtt-bench's -V 3|4|5 where 3.1 is not offered.
    aliases = {3: 3, 4: 3, "3": 3, "4": 3, "3.1.1": 3, 5: 5, "5": 5, "5.0": 5}  # 5.0 == 5 as a key
    try:
        return aliases[value]
    except (KeyError, TypeError):
        raise _problem(f'must be 3 (MQTT 3.1.1) or 5 (MQTT 5.0) (got {value!r})') from None


MqttVersion = Annotated[
    int,
    BeforeValidator(_mqtt_version),
    WithJsonSchema({"enum": [3, 4, 5, "3.1.1", "5.0"], "description": "3 or 4 = MQTT 3.1.1, 5 = MQTT 5.0"}),
]


# --- templates -----------------------------------------------------------------------------

_TEMPLATE_VARIABLE = re.compile(r"%(.?)")


def check_template(text: str, known: tuple[str, ...]) -> str:
    """Rejects any %x that is not one of `known` (e.g. ("%i", "%c"))."""
    for match in _TEMPLATE_VARIABLE.finditer(text):
        variable = match.group(0)
        if variable not in known:
            raise _problem(f"unknown template variable {variable!r} (allowed: {', '.join(known)})")
    return text


def _client_id_template(text: str) -> str:
    if not text:
        raise _problem("must not be empty")
    return check_template(text, ("%i",))


ClientIdTemplate = Annotated[str, AfterValidator(_client_id_template)]


def _topic_template(text: str) -> str:
    if not text:
        raise _problem("must not be empty")
    if "+" in text or "#" in text:
        raise _problem(f"a publish topic cannot contain the wildcards + or # (got {text!r})")
    if "\x00" in text:
        raise _problem("must not contain the NUL character")
    return check_template(text, ("%i", "%c"))


TopicTemplate = Annotated[str, AfterValidator(_topic_template)]


def _filter_template(text: str) -> str:
    check_template(text, ("%i", "%c"))
    body = text
    if text.startswith("$share/"):
        parts = text.split("/", 2)
        if len(parts) < 3 or not parts[1] or not parts[2]:
            raise _problem(f"a shared subscription is $share/GROUP/FILTER (got {text!r})")
        if "+" in parts[1] or "#" in parts[1]:
            raise _problem(f"the share group name cannot contain + or # (got {parts[1]!r})")
        body = parts[2]
    if not body:
        raise _problem("must not be empty")
    levels = body.split("/")
    for position, level in enumerate(levels):
        if "#" in level and (level != "#" or position != len(levels) - 1):
            raise _problem(f"# must be a whole level and the last one (got {text!r})")
        if "+" in level and level != "+":
            raise _problem(f"+ must be a whole level (got {text!r})")
    return text


FilterTemplate = Annotated[str, AfterValidator(_filter_template)]


# --- broker address ------------------------------------------------------------------------

_BROKER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
#: MQTT over TCP or TLS, and over WebSocket on either (the path names the broker's listener)
URL_SCHEMES = ("mqtt", "mqtts", "ws", "wss")
WEBSOCKET_SCHEMES = ("ws", "wss")
TLS_SCHEMES = ("mqtts", "wss")
_DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883, "ws": 80, "wss": 443}
#: the path of a broker's WebSocket listener when a ws:// URL names none (Mosquitto, HiveMQ,
#: NanoMQ, EMQX and RabbitMQ's web-mqtt serve MQTT there)
DEFAULT_WEBSOCKET_PATH = "/mqtt"
#: a broker launched from a container image: image:emqx/emqx:5.8, image:localhost:5000/b@sha256:...
IMAGE_PREFIX = "image:"
_IMAGE_REFERENCE = re.compile(r"[a-z0-9][a-z0-9._/:-]*(@sha256:[0-9a-f]{64})?")


def _broker(value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    if value.startswith(IMAGE_PREFIX):
        if not _IMAGE_REFERENCE.fullmatch(value[len(IMAGE_PREFIX):]):
            raise _problem(f"an image is given as image:REPOSITORY[:TAG][@DIGEST], e.g. image:emqx/emqx:5.8 (got {value!r})")
        return value
    if "://" not in value:
        if not _BROKER_NAME.fullmatch(value):
            raise _problem(f"must be an mqtt://, mqtts://, ws:// or wss:// URL, a broker name such as rumqttd or mosquitto, or image:REF (got {value!r})")
        return value
    parsed = urlsplit(value)
    if parsed.scheme not in URL_SCHEMES:
        raise _problem(f"the URL scheme must be mqtt://, mqtts://, ws:// or wss:// (got {parsed.scheme}://)")
    try:
        port = parsed.port
    except ValueError:
        raise _problem(f"the port must be a number from 1 to 65535 (got {value!r})") from None
    if not parsed.hostname:
        raise _problem(f"the URL needs a host, as in mqtt://127.0.0.1:1883 (got {value!r})")
    if port == 0:
        raise _problem(f"the port must be a number from 1 to 65535 (got {value!r})")
    # A query (?pid=N&name=...&version=...) describes an external broker for the manifest.
    websocket = parsed.scheme in WEBSOCKET_SCHEMES
    if (parsed.path not in ("", "/") and not websocket) or parsed.fragment or parsed.username:
        raise _problem(f"only mqtt[s]://HOST[:PORT][?pid=N&name=NAME] or ws[s]://HOST[:PORT][/PATH] is understood (got {value!r})")
    if websocket and any(c.isspace() for c in parsed.path):
        raise _problem(f"the WebSocket path must hold no spaces (got {parsed.path!r})")
    return value


Broker = Annotated[Optional[str], AfterValidator(_broker)]


def is_url(broker: Optional[str]) -> bool:
    return broker is not None and "://" in broker


def is_image(broker: Optional[str]) -> bool:
    return broker is not None and broker.startswith(IMAGE_PREFIX)


class BrokerAddress(NamedTuple):
    """A broker URL taken apart, and put together again, in this one place."""

    scheme: str
    host: str
    port: int
    #: the WebSocket upgrade's path (ws://, wss://); None for MQTT straight over TCP or TLS
    path: Optional[str] = None

    @classmethod
    def parse(cls, url: str) -> "BrokerAddress":
        """The address of a URL that passed validation; ports default to 1883/8883 (ws:// 80,
        wss:// 443, as for any WebSocket URL), a WebSocket path to /mqtt."""
        parsed = urlsplit(url)
        path = None
        if parsed.scheme in WEBSOCKET_SCHEMES:
            path = parsed.path if parsed.path not in ("", "/") else DEFAULT_WEBSOCKET_PATH
        return cls(parsed.scheme, parsed.hostname or "", parsed.port or _DEFAULT_PORTS.get(parsed.scheme, 1883), path)

    @property
    def tls(self) -> bool:
        return self.scheme in TLS_SCHEMES

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal, as in a URL
        return f"{self.scheme}://{host}:{self.port}{self.path or ''}"


# --- files ---------------------------------------------------------------------------------


def _existing_file(value: Optional[Path], info: ValidationInfo) -> Optional[Path]:
    # Relative paths are relative to the scenario file, so a scenario and its certificates can
    # move together.
    if value is None:
        return None
    base: Any = (info.context or {}).get("base_dir")
    path = value if value.is_absolute() or base is None else Path(base) / value
    if not path.is_file():
        raise _problem(f"file not found: {path}")
    return path.resolve()


ExistingFile = Annotated[Optional[Path], AfterValidator(_existing_file)]


def _cpu_list(value: Any) -> Any:
    # `--set launch.limits.cpuset=0` reads the 0 as a number: a single CPU is a CPU list too.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


CPU_LIST_PATTERN = r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$"
CpuList = Annotated[Optional[Annotated[str, StringConstraints(pattern=CPU_LIST_PATTERN)]], BeforeValidator(_cpu_list)]

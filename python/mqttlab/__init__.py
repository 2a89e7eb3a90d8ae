"""mqttlab: a laboratory for the performance of MQTT brokers."""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("mqttlab")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]

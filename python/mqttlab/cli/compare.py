"""`mqttlab compare`: brokers side by side over runs and suites (docs/compare.md)."""

from __future__ import annotations

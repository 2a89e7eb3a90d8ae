"""What the Erlang brokers (ejabberd, RabbitMQ) share: where Debian puts Erlang's tools, and the
environment their VM starts from."""

from __future__ import annotations

import os

SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin", "/usr/lib/erlang/bin"])


def clean_environment(broker_prefix: str) -> dict[str, str]:
    """This process's environment without ERL_* and the broker's own variables (`broker_prefix`):
    settings a user's shell may carry for another node must not leak into the run's."""
    return {key: value for key, value in os.environ.items() if not key.startswith(("ERL_", broker_prefix))}

"""What goes wrong with a broker, as exceptions: a module of its own so that the launchers and the
cgroup limits (which base.py uses) can both raise them without importing each other."""


class BrokerError(Exception):
    """A broker could not be installed, started or reached; the message says why."""


class BrokerUnavailable(BrokerError):
    """The broker is not installed here; the message says how to get it."""


class BrokerStartError(BrokerError):
    """The broker was launched but did not come up; the message carries its log tail."""


class ContainerSetupError(BrokerError):
    """The container cannot be described as asked (an image without a preset and no port, an
    option the preset cannot honour): a scenario problem, not an unavailable broker."""

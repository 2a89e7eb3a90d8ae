"""What one run needs around the engine, brought up from its scenario and torn down in reverse:
the emulated network, the broker, the MQTT-SN gateway, the traffic capture, the resource sampler
and the fault driver. `bring_up` decides everything a scenario can ask for (so `mqttlab run` and
`mqttlab.run()` get the same environment) and the one URL the engine's clients connect to.

Failures that leave nothing to measure raise `RunFailed` with the exit code they mean."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from mqttlab import engine, results
from mqttlab.exits import Exit, HostLimitReached, RunFailed
from mqttlab.environment.faults import FaultDriver, fault_section
from mqttlab.scenario import Scenario
from mqttlab.scenario.fields import BrokerAddress, is_url
from mqttlab.summary_types import add_section

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from mqttlab.brokers.base import Placement, RunningBroker
    from mqttlab.brokers.gateway import RunningGateway
    from mqttlab.netem import EmulatedNetwork
    from mqttlab.netem.capture import Capture
    from mqttlab.environment.resources import RunResources

EMBEDDED_BROKER = "rumqttd"

# Given a broker's name, a context around its launch: the CLI's "starting rabbitmq … 12 s".
Starting = Callable[[str], "AbstractContextManager[Any]"]


@dataclass
class RunEnvironment:
    """A run's surroundings, up. `scenario` is the one the clients follow (a launched broker's
    throwaway CA trusted, its login used); `url` is where the engine's clients connect (the
    gateway's for MQTT-SN, the broker's address behind the emulated link)."""

    scenario: Scenario
    broker: RunningBroker
    url: str
    network: Optional[EmulatedNetwork]
    network_before: Optional[dict[str, Any]]  # the link as measured before the load
    gateway: Optional[RunningGateway]
    sampler: RunResources
    faults: Optional[FaultDriver]
    capture: Optional[Capture]
    capture_problem: Optional[str]  # why a capture the scenario asked for is not made

    @contextmanager
    def measuring(self) -> Iterator[None]:
        """Around the engine's run: resources sampled, faults applied, and the capture stopped
        when the load is over."""
        try:
            with ExitStack() as stack:
                stack.enter_context(self.sampler)
                if self.faults is not None:
                    stack.enter_context(self.faults)
                yield
        finally:
            if self.capture is not None:
                self.capture.stop()

    def observe(self, snapshot: dict[str, Any]) -> None:
        """Every progress snapshot: the fault timeline follows the load."""
        if self.faults is not None:
            self.faults.observe(snapshot)

    def broker_info(self) -> results.BrokerInfo:
        broker = self.broker
        return results.BrokerInfo(name=broker.name, version=broker.version, url=self.url, pid=broker.pid, config=broker.config, build=broker.build,
                                  limits=broker.cgroup.outcome() if broker.cgroup is not None else None)

    def add_sections(self, plan: engine.Plan, outcome: engine.RunOutcome) -> None:
        """What the environment saw, each a section of the summary: capture, network, faults
        (while it is still up: the link's counters and the cgroup are read from it)."""
        if self.capture is not None:
            add_section(outcome.summary, "capture", _analyse_capture(self.capture))
        elif self.capture_problem is not None:
            add_section(outcome.summary, "capture", {"error": f"options.capture: {self.capture_problem}"})
        if self.network is not None:
            from mqttlab.netem import run_link

            assert self.network_before is not None  # measured when the network came up
            add_section(outcome.summary, "network", run_link.measure_after(self.network, self.network_before, plan, outcome.result))
        if self.faults is not None:
            rows = results.series_rows(outcome.result, engine.histogram_stats)
            add_section(outcome.summary, "faults", fault_section(self.faults.applied, plan, outcome.result, rows))


@contextmanager
def bring_up(scenario: Scenario, directory: Path, *, dask: Optional[str] = None, capture: Optional[bool] = None,
             starting: Optional[Starting] = None) -> Iterator[RunEnvironment]:
    """Brings up what `scenario` needs, in `directory`, and tears it down in reverse on exit.
    `capture`: True = asked for by the user (refused when it cannot be made here), None = as the
    scenario's `options.capture` says (a run that cannot be captured is still measured, its
    summary saying why), False = none. `dask`: the clients run on a cluster's workers."""
    capturing, capture_problem_ = _capture_decision(scenario, dask, capture)
    if dask is None:
        _room_for_connections(scenario)
        _check_generator_cpus(scenario)
    with ExitStack() as stack:
        network = _open_network(scenario, directory, stack)
        placement = network.placement() if network is not None else None
        broker = _open_broker(scenario, directory, stack, placement=placement, starting=starting)
        broker_url = _broker_url(scenario, broker)
        gateway = _open_gateway(scenario, directory, stack, broker_url, placement=placement, broker=broker)
        url = _engine_url(broker_url, gateway, network)
        network_before = None
        if network is not None:
            from mqttlab.netem import run_link

            network_before = run_link.measure_before(network)
        clients = _with_broker_login(_trusting_launched_ca(scenario, broker) if scenario.launch.tls else scenario, broker)
        sampler = _resource_sampler(broker.pid, gateway.pid if gateway is not None else None, holds_state=_holds_state(scenario))
        faults = _fault_driver(scenario, broker, dask, sampler, network, url)
        tshark = _open_capture(url, directory, network) if capturing else None
        if tshark is not None:
            stack.callback(tshark.stop)  # after a load that ran it is stopped already (stop is idempotent)
        yield RunEnvironment(scenario=clients, broker=broker, url=url, network=network, network_before=network_before,
                             gateway=gateway, sampler=sampler, faults=faults, capture=tshark, capture_problem=capture_problem_)


def capture_problem(scenario: Scenario, dask: Optional[str]) -> Optional[str]:
    """Why the run's MQTT traffic cannot be captured and decoded here, or None."""
    from mqttlab.netem.capture import tshark_path

    if tshark_path() is None:
        return "tshark is not installed (Debian: apt-get install tshark; scripts/install-test-tools.sh does it)"
    if dask is not None:
        return "not with --dask (the clients run on other hosts)"
    if scenario.transport.kind != "mqtt":
        return "MQTT over TCP only: an MQTT-SN datagram is one packet, there is nothing to bundle"
    if scenario.launch.tls or (scenario.broker or "").startswith(("mqtts://", "ssl://")):
        return "not over TLS (tshark cannot read the MQTT packets inside)"
    return None


def _capture_decision(scenario: Scenario, dask: Optional[str], asked: Optional[bool]) -> tuple[bool, Optional[str]]:
    """(capture or not, why a capture the scenario asked for is not made)."""
    if asked:
        problem = capture_problem(scenario, dask)
        if problem:
            raise RunFailed(f"error: --capture: {problem}", Exit.BAD_INPUT)
        return True, None
    if asked is None and scenario.options.capture:
        # Asked for by the scenario (so by every run of a suite): a host or run that cannot be
        # captured is still measured, and its summary says why it has no bundling table.
        problem = capture_problem(scenario, dask)
        return problem is None, problem
    return False, None


def _room_for_connections(scenario: Scenario) -> None:
    """Open files for every connection, raised before a broker is launched so that it inherits
    the room too; a host that cannot give it stops the run here, saying what to change."""
    try:
        engine.ensure_open_files(scenario.publishers.count + scenario.subscribers.count)
    except engine.HostCannotRun as error:
        raise HostLimitReached(f"error: {error}") from None


def _check_generator_cpus(scenario: Scenario) -> None:
    """options.generator_cpus names CPUs of this host, checked before anything is launched."""
    cpus = scenario.options.generator_cpus
    problem = engine.cpus_problem(cpus) if cpus else None
    if problem:
        raise RunFailed(f"error: options.generator_cpus: {problem}", Exit.BAD_INPUT)


def _open_network(scenario: Scenario, directory: Path, stack: ExitStack) -> Optional[EmulatedNetwork]:
    """The emulated network of a `network:` section (torn down on exit), or None."""
    if scenario.network is None:
        return None
    from mqttlab.netem import EmulatedNetwork, NetemError

    conditions = scenario.network
    if any(fault.kind in ("link-down", "link-degrade") for fault in scenario.faults) and conditions.method == "auto":
        # Only the user-space emulator can cut or change the link mid-run (the kernel here has no
        # tc actions to drop with), so a link fault asks for it.
        conditions = conditions.model_copy(update={"method": "emulator"})
    try:
        return stack.enter_context(EmulatedNetwork(conditions, directory / "network", seed=scenario.load.seed))
    except NetemError as error:
        raise RunFailed(f"error: network: {error}", Exit.UNREACHABLE) from None


def _open_broker(scenario: Scenario, directory: Path, stack: ExitStack, placement: Optional[Placement] = None,
                 starting: Optional[Starting] = None) -> RunningBroker:
    """The RunningBroker to measure: described from a URL, or launched (and stopped on exit).
    `placement` (from a network section) runs a launched broker inside the emulated network;
    `starting` is shown while a launched broker starts."""
    from mqttlab.brokers import BrokerError, UnknownBroker, get_launcher
    from mqttlab.brokers.errors import ContainerSetupError
    from mqttlab.brokers.external import ExternalLauncher

    target = scenario.broker or EMBEDDED_BROKER
    try:
        launcher = get_launcher(target)
        if scenario.launch.container is not None and hasattr(launcher, "use_container"):
            launcher.use_container(scenario.launch.container.model_dump())
    except (UnknownBroker, ContainerSetupError) as error:
        raise RunFailed(f"error: broker: {error}", Exit.BAD_INPUT) from None
    if placement is not None:
        if is_url(target):
            raise RunFailed("error: network: needs a broker that mqttlab launches (a name such as mosquitto), not a URL", Exit.BAD_INPUT)
        launcher.placement = placement
    try:
        if isinstance(launcher, ExternalLauncher):
            return launcher.describe()  # the engine's own connect reports an unreachable broker
        launch = scenario.launch
        launcher.configure(launch.config, launch.version, launch.limits.model_dump() if launch.limits else None, launch.persistence)
        refused = launcher.persistence_problem()
        if refused:
            raise RunFailed(f"error: launch.persistence: {refused}", Exit.BAD_INPUT)
        if launch.websocket and not launcher.has_websocket:
            raise RunFailed(f"error: launch.websocket: {launcher.name} is launched without a WebSocket listener here; "
                            "docs/brokers.md lists the launchers that have one", Exit.BAD_INPUT)
        launcher.websocket = launch.websocket
        with starting(launcher.name or target) if starting is not None else nullcontext():
            return stack.enter_context(launcher.start(directory / "broker", tls=launch.tls))
    except ContainerSetupError as error:
        raise RunFailed(f"error: broker {target}: {error}", Exit.BAD_INPUT) from None
    except BrokerError as error:
        raise RunFailed(f"error: cannot start {target}: {error}", Exit.UNREACHABLE) from None


def _open_gateway(scenario: Scenario, directory: Path, stack: ExitStack, broker_url: str, placement: Optional[Placement],
                  broker: RunningBroker) -> Optional[RunningGateway]:
    """For `transport: mqtt-sn`, the gateway `transport.gateway` names in front of the broker
    (stopped on exit), placed beside a broker that runs in an emulated network; else None."""
    if scenario.transport.kind != "mqtt-sn":
        return None
    from mqttlab.brokers import BrokerError
    from mqttlab.brokers.gateway import GatewayLauncher
    from mqttlab.brokers.paho_gateway import PahoGatewayLauncher

    t = scenario.transport
    try:
        if t.gateway == "rsmb":
            return _rsmb_gateway(scenario, directory, stack, broker_url, placement, broker)
        launcher = PahoGatewayLauncher() if t.gateway == "paho" else GatewayLauncher()
        if placement is not None:
            launcher.placement = placement
        return stack.enter_context(
            launcher.start(directory / "gateway", broker_url, predefined=dict(t.predefined), retry_ms=max(1, int(t.retry * 1000)))
        )
    except BrokerError as error:
        raise RunFailed(f"error: MQTT-SN gateway {t.gateway} (transport.gateway): {error}", Exit.UNREACHABLE) from None


def _rsmb_gateway(scenario: Scenario, directory: Path, stack: ExitStack, broker_url: str, placement: Optional[Placement],
                  broker: RunningBroker) -> RunningGateway:
    """RSMB's own MQTT-SN listener serves the MQTT-SN clients (seed 004's setup): the launched
    broker's when it is RSMB, else an RSMB launched beside the broker (same placement, config mode
    and limits), which then is the clients' broker; docs/mqtt-sn.md says why."""
    from mqttlab.brokers import get_launcher
    from mqttlab.brokers.gateway import RunningGateway

    if broker.mqtt_sn_port is not None:
        assert broker.pid is not None and broker.log_file is not None  # a launched RSMB
        return RunningGateway(broker.host, broker.mqtt_sn_port, broker_url, broker.pid, broker.log_file,
                              {"role": "the broker's own MQTT-SN listener", "serves_clients": True}, name="rsmb",
                              version=broker.version)
    launch = scenario.launch
    launcher = get_launcher("rsmb").configure(launch.config if launch.config in ("tuned", "as-shipped") else "tuned",
                                              None, launch.limits.model_dump() if launch.limits else None)
    if placement is not None:
        launcher.placement = placement
    rsmb = stack.enter_context(launcher.start(directory / "gateway"))
    assert rsmb.mqtt_sn_port is not None and rsmb.pid is not None and rsmb.log_file is not None
    # Its cgroup goes with it and is read for the manifest after the run (read here, at the start,
    # its counters would show one CPU period and the memory of an idle RSMB, whatever the load).
    return RunningGateway(rsmb.host, rsmb.mqtt_sn_port, broker_url, rsmb.pid, rsmb.log_file,
                          {"role": f"RSMB serves the MQTT-SN clients itself; {broker.name} carries none of their messages",
                           "serves_clients": True, "config": rsmb.config, "build": rsmb.build},
                          name="rsmb", version=rsmb.version, cgroup=rsmb.cgroup)


def _broker_url(scenario: Scenario, broker: RunningBroker) -> str:
    """The broker's URL for the scenario's clients: the scenario's own for a broker given by URL,
    else the launched broker's listener that the scenario asks for."""
    if is_url(scenario.broker):
        return BrokerAddress.parse(scenario.broker or "").url  # its default port and path spelled out
    if scenario.launch.websocket:
        return broker.url(tls=scenario.launch.tls, websocket=True)
    if scenario.launch.tls:
        return broker.url(tls=True)
    # Some brokers (rumqttd) serve MQTT 5 on a listener of its own.
    if scenario.mqtt.version == 5 and broker.v5_port:
        return f"mqtt://{broker.host}:{broker.v5_port}"
    return broker.url()


def _engine_url(broker_url: str, gateway: Optional[RunningGateway], network: Optional[EmulatedNetwork]) -> str:
    """Where the engine's clients connect: the gateway's UDP address for MQTT-SN, and behind an
    emulated link the broker's (or gateway's) address on the far side of it."""
    url = f"mqtt://{gateway.host}:{gateway.port}" if gateway is not None else broker_url
    if network is not None:
        from mqttlab.netem import run_link

        url = run_link.broker_url(url, network)
    return url


def _with_broker_login(scenario: Scenario, broker: RunningBroker) -> Scenario:
    """A launched broker that admits no anonymous client (ejabberd) names the login its clients
    use; the scenario's own user name, if any, wins."""
    credentials = broker.credentials
    if not credentials or scenario.mqtt.username is not None:
        return scenario
    mqtt = scenario.mqtt.model_copy(update={"username": credentials[0], "password": credentials[1]})
    return scenario.model_copy(update={"mqtt": mqtt})


def _trusting_launched_ca(scenario: Scenario, broker: RunningBroker) -> Scenario:
    """The scenario with the launched broker's throwaway CA trusted; its certificate names the
    address the broker is reached at (loopback, or the emulated network's), so it is verified."""
    from mqttlab.scenario.model import TlsSettings

    tls = TlsSettings.model_construct(ca=str(broker.ca_file), cert=None, key=None, insecure=False, server_name=None)
    return scenario.model_copy(update={"tls": tls})


def _holds_state(scenario: Scenario) -> bool:
    """Whether the broker holds state for the subscribers to read later (offline sessions, a
    retained read), whose memory per message is measured (mqttlab.state_memory)."""
    return scenario.subscribers.offline is not None or scenario.subscribers.retained is not None


def _resource_sampler(broker_pid: Optional[int], gateway_pid: Optional[int] = None, holds_state: bool = False) -> RunResources:
    """Samples the broker's (when its PID is known), the MQTT-SN gateway's (a process of its own:
    RSMB beside the broker, Paho's or mqttlab's gateway) and this process's CPU and memory every
    second on the engine's clock (every 0.1 s when the broker `holds_state`, so that its RSS is
    read close to the moment that state peaks); a PID that is gone only drops that process's
    figures. The gateway runs as a child of this process, so without its own sampler it would
    count as the generator's."""
    from mqttlab.environment.resources import RunResources
    from mqttlab.state_memory import STATE_SAMPLE_INTERVAL_S

    gateway = gateway_pid if gateway_pid != broker_pid else None  # RSMB as the broker serves MQTT-SN itself
    interval = STATE_SAMPLE_INTERVAL_S if holds_state else 1.0
    try:
        return RunResources(broker_pid, interval, gateway_pid=gateway)
    except ValueError:
        return RunResources(None, interval, gateway_pid=gateway)


def _fault_driver(scenario: Scenario, broker: RunningBroker, dask: Optional[str], sampler: RunResources,
                  network: Optional[EmulatedNetwork], url: str) -> Optional[FaultDriver]:
    """The scenario's faults bound to the launched broker's process and the emulated link, or
    None without faults."""
    if not scenario.faults:
        return None
    if dask is not None:
        raise RunFailed("error: faults: not with --dask (the fault timeline follows this process's engine)", Exit.BAD_INPUT)
    needs_process = any(fault.kind.startswith("broker-") for fault in scenario.faults)
    if needs_process and (broker.pid is None or not broker.can_restart()):
        raise RunFailed(f"error: faults: {broker.name} runs without a process mqttlab started here; faults need one", Exit.BAD_INPUT)
    _, host, port, _ = BrokerAddress.parse(url)
    return FaultDriver(scenario.faults, broker, restarted=sampler.broker_restarted, network=network,
                       target=(socket.gethostbyname(host), port))


def _open_capture(url: str, directory: Path, network: Optional[EmulatedNetwork]) -> Capture:
    """tshark on the device the clients' segments cross: the host end of the emulated link, `lo`
    for a broker on this host, else every device (`any`)."""
    from mqttlab.netem.capture import Capture, CaptureError

    _, host, port, _ = BrokerAddress.parse(url)
    if network is not None:
        device = network.host_tun if network.method == "emulator" else network.host_veth
    elif host in ("localhost", "::1") or host.startswith("127."):
        device = "lo"
    else:
        device = "any"
    capture = Capture(device, int(port), directory / "capture")
    try:
        capture.start()
    except CaptureError as error:
        raise RunFailed(f"error: --capture: {error}", Exit.BAD_INPUT) from None
    return capture


def _analyse_capture(capture: Capture) -> dict[str, Any]:
    from mqttlab.netem.capture import CaptureError

    try:
        return capture.analyse()
    except CaptureError as error:  # the run itself is fine: keep its results, say why there is no table
        return {"device": capture.device, "port": capture.port, "error": str(error)}

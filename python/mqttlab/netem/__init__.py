"""Network conditions between the clients and the broker, built from real kernel parts: a network
namespace for the broker joined by a veth pair, tc tbf/netem qdiscs, or (where the kernel has no
netem) the user-space packet emulator over TUN devices. See docs/network.md."""

from mqttlab.netem.capability import Capabilities, detect
from mqttlab.netem.commands import NetemError
from mqttlab.netem.names import clean_leftovers
from mqttlab.netem.network import EmulatedNetwork

__all__ = ["Capabilities", "EmulatedNetwork", "NetemError", "clean_leftovers", "detect"]

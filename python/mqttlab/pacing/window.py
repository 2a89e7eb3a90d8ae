"""Window filling (arrival: window): a publisher sends whenever its in-flight window
(publishers.inflight) has room, as fast as the socket takes them at QoS 0: the generator's
saturating mode. A message's latency is taken from the instant its slot in the window opened."""

from __future__ import annotations

from typing import Any, Mapping

from mqttlab.pacing.mode import PacingMode


class Window(PacingMode):
    arrival = "window"
    scheduled = False
    measured_as = "window"
    sends_when = "whenever the in-flight window has room"
    message_goes = "a message goes whenever the window has room"

    def pace_words(self, publishers: Mapping[str, Any]) -> str:
        return f", filling a window of {publishers['inflight']:,}" if publishers["qos"] else ", as fast as the socket takes them"

    def measurement_words(self, measurement: Mapping[str, Any]) -> str:
        return "window filling: each message sent when the in-flight window had room; latency from the instant its slot opened"


MODE = Window()

"""Entry point of the MQTT-SN gateway's child process:

    python -m mqttlab.brokers.gateway_main CONFIG.json

The gateway is compiled into mqttlab's extension module (crate mqttlab-gateway). On SIGTERM it
closes every session (DISCONNECT to clients and broker) instead of dying mid-packet."""

import sys

from mqttlab.component import serve_component

if __name__ == "__main__":
    sys.exit(serve_component(sys.argv[1:], module="mqttlab.brokers.gateway_main", what="mqttlab gateway",
                             serve="gateway"))

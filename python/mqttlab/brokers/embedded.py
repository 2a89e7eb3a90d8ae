"""Entry point of the embedded rumqttd broker's child process:

    python -m mqttlab.brokers.embedded CONFIG.json

The broker is compiled into mqttlab's extension module; running it in a separate process keeps
its CPU and memory apart from the load generator's, so both can be measured."""

import sys

from mqttlab.component import serve_component

if __name__ == "__main__":
    sys.exit(serve_component(sys.argv[1:], module="mqttlab.brokers.embedded", what="embedded rumqttd",
                             serve="broker"))

"""Entry point of the user-space emulated link's child process:

    python -m mqttlab.netem.link CONFIG.json

The forwarding runs in the compiled engine (crates/mqttlab-link); a clean stop on SIGTERM makes
its counters file final."""

import sys

from mqttlab.component import serve_component

if __name__ == "__main__":
    sys.exit(serve_component(sys.argv[1:], module="mqttlab.netem.link", what="emulated link", serve="link"))

"""A one-connection TCP sink, started inside the broker's namespace by probe.bulk_transfer:

    python -m mqttlab.netem.sink PORT

Prints "ready" once listening, then "<bytes> <seconds from first to last byte>" when the sender closes."""

from __future__ import annotations

import socket
import sys
import time


def main(port: int) -> None:
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", port))
        server.listen(1)
        server.settimeout(20)
        print("ready", flush=True)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(30)
            total, first, last = 0, None, None
            while data := conn.recv(65536):
                now = time.monotonic()
                first = first if first is not None else now
                total, last = total + len(data), now
    elapsed = (last - first) if first is not None and last is not None else 0.0
    print(total, f"{elapsed:.6f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))

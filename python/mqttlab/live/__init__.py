"""A run while it goes: its live state (state.py, kept in live.json), the terminal display
(view.py) and the Prometheus metrics endpoint (metrics.py), all built from the same state."""

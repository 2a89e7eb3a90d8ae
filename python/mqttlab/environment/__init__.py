"""What a run needs around the engine: bring_up.py brings up network, broker, gateway, capture,
resource sampling (resources.py) and faults (faults.py) from the scenario, and tears them down in
reverse."""

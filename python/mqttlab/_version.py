"""mqttlab's version, as a constant: reading it from the installed package's metadata costs
`mqttlab --version` more than the rest of its start. pyproject.toml and Cargo.toml carry the
same number (tests/test_structure.py checks that they agree)."""

VERSION = "0.1.0"

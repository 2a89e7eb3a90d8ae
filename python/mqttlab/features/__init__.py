"""What a broker supports, measured: `mqttlab brokers probe` (docs/brokers.md, "Feature matrix").

    checks.py  the features, one entry each: the settings of its tiny run and the rule that judges it
    probe.py   one broker brought up once and each feature checked by a real run through the session
    matrix.py  the results as tables: one broker's in the terminal, every broker's in docs/brokers.md
"""

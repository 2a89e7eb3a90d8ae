"""`python -m mqttlab` runs the same command as the `mqttlab` console script."""

from mqttlab.cli.app import main

if __name__ == "__main__":
    main()

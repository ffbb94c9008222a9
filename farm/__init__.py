"""The sweep: grid specs and presets, GPU worker actors, the measurement protocol, the driver, the CLI."""

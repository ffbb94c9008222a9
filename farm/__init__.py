"""The sweep: grid specs and presets, planning, GPU worker actors, the measurement protocol and the
driver, with `farm/sweep.py`, the plain script `ray submit` runs. The `farm` command is in cli/."""

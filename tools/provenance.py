"""The provenance line of a results file under docs/results: which command wrote it, on what.

Every file there has a sidecar `NAME.meta` holding one line,

    # command: python benchmarks/x.py ...; gpu: NVIDIA H200; driver: 580.159.04; torch: ...;
    #   triton: ...; date: ...   (one line in the file)

so that CSV readers need no change (a sidecar, not a comment row). A benchmark calls `write_meta` beside
the file it writes (or `write_results`, the CSV and its sidecar together); this module is the line's one
owner.
"""

from __future__ import annotations

import csv
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path


def driver_version() -> str:
    """The NVIDIA driver's version from NVML, "unknown" without a GPU or NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return str(pynvml.nvmlSystemGetDriverVersion())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return "unknown"


def provenance(command: str) -> str:
    import torch
    import triton

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)"
    date = datetime.now(UTC).date().isoformat()
    return (
        f"# command: {command}; gpu: {gpu}; driver: {driver_version()}; torch: {torch.__version__}; "
        f"triton: {triton.__version__}; date: {date}"
    )


def this_command() -> str:
    """The command line that started this process, as a user would type it."""
    return shlex.join(["python", *sys.argv])


def write_meta(path: str | Path, command: str | None = None) -> Path:
    """Write `path`.meta with the provenance of `path` (this process's command line by default)."""
    meta = Path(f"{path}.meta")
    meta.write_text(provenance(command or this_command()) + "\n")
    return meta


def write_results(path: str | Path, columns: Sequence[str], rows: Iterable[Mapping]) -> None:
    """Write `rows` as a CSV with `columns` in that order, and its provenance sidecar."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    write_meta(path)

"""`--plugin FILE.py`: a user's file that registers variants with `kernels.register_variant`.

The driver reads each file once and ships its text to the workers, which may run on other
machines; each side imports it from a real file (Triton's JIT reads kernel source through
`inspect`, which needs one).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from farm.errors import UserError
from farm.host_folders import private_folder


class PluginError(UserError):
    pass


@dataclass(frozen=True)
class PluginSource:
    name: str  # the file's name, kept so tracebacks and inspect point somewhere recognisable
    text: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:12]


def read_plugin(path: str) -> PluginSource:
    p = Path(path)
    if p.suffix != ".py":
        raise PluginError(f"plugin {path}: expected a .py file")
    try:
        return PluginSource(p.name, p.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise PluginError(f"cannot read plugin {path}: {getattr(exc, 'strerror', None) or exc}") from None


def import_file(path: Path, module_name: str) -> None:
    """Import a plugin file as a module; any error becomes a PluginError naming the file."""
    if module_name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise PluginError(f"plugin {path} failed to load: {type(exc).__name__}: {exc}") from None


def load_plugin(path: str) -> PluginSource:
    """Driver side: read, then import from the user's own path (so code versions hash that file)."""
    source = read_plugin(path)
    import_file(Path(path).resolve(), f"farm_plugin_{Path(path).stem}_{source.digest}")
    return source


def plugin_folder() -> Path:
    """Where workers write plugins: one folder per host and user, each file under its digest, so
    that every worker of the host shares one copy and none is left behind per process (one
    `mkdtemp` per worker start had left 3,472 folders in this VM's /tmp). A folder another user
    controls is refused (`private_folder`): its files would be imported. The copies stay for the next
    sweep (one folder per plugin version, a few KB each) and are safe to delete while no sweep runs
    (README, "Troubleshooting")."""
    return private_folder("farm-plugins")


def install_sources(sources: list[PluginSource]) -> None:
    """Worker side: write each plugin under its digest (once per host) and import it there."""
    folder = plugin_folder() if sources else None
    for source in sources:
        path = folder / source.digest / source.name
        if not path.is_file() or path.read_text() != source.text:
            path.parent.mkdir(exist_ok=True)
            # written whole, then renamed: a worker starting beside this one reads all of it or none
            partial = path.with_name(f".{source.name}.{os.getpid()}")
            partial.write_text(source.text)
            partial.replace(path)
        import_file(path, f"farm_plugin_{Path(source.name).stem}_{source.digest}")

"""Where a worker writes the plugins it is sent: one copy per host and digest, none per process."""

import os
import sys
import tempfile

import pytest

from farm.host_folders import UnsafeFolder
from farm.plugins import PluginSource, install_sources, plugin_folder

TEXT = "LOADED_FROM = __file__\n"


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("farm_plugin_mine_")]:
        del sys.modules[name]


def test_no_plugins_write_nothing(own_tmp):
    install_sources([])
    assert list(own_tmp.iterdir()) == []


def test_workers_of_a_host_share_one_file_and_a_wrong_one_is_replaced(own_tmp):
    source = PluginSource("mine.py", TEXT)
    path = plugin_folder() / source.digest / "mine.py"
    path.parent.mkdir(parents=True)
    path.write_text("raise RuntimeError('a truncated copy')\n")  # a file left by a worker killed mid-write

    install_sources([source])
    module = sys.modules[f"farm_plugin_mine_{source.digest}"]
    assert str(path) == module.LOADED_FROM
    assert path.read_text() == TEXT

    del sys.modules[f"farm_plugin_mine_{source.digest}"]  # a second worker process of the same host
    install_sources([source])
    assert sorted(p.name for p in plugin_folder().rglob("*")) == sorted([source.digest, "mine.py"])


def test_a_plugin_folder_someone_else_controls_is_refused_before_anything_is_written(own_tmp):
    target = own_tmp / "elsewhere"
    target.mkdir()
    (own_tmp / f"farm-plugins-{os.getuid()}").symlink_to(target)
    with pytest.raises(UnsafeFolder, match="not a folder of this user's"):
        install_sources([PluginSource("mine.py", TEXT)])
    assert list(target.iterdir()) == []

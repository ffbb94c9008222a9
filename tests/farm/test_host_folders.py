"""The folders a host's workers share (`farm.host_folders.private_folder`): the plugins they import
and the Triton cache they load kernels from. One per purpose and user, made private; one that
another user controls is refused, whatever the purpose."""

import os
import stat
import tempfile

import pytest

from farm.host_folders import UnsafeFolder, private_folder
from farm.worker import host_triton_cache


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_made_once_private_and_found_again(own_tmp):
    folder = private_folder("farm-things")
    assert folder == own_tmp / f"farm-things-{os.getuid()}"
    assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0
    (folder / "kept").write_text("x")
    assert private_folder("farm-things") == folder and (folder / "kept").read_text() == "x"


def test_the_triton_cache_is_such_a_folder(own_tmp):
    assert host_triton_cache() == str(own_tmp / f"farm-triton-cache-{os.getuid()}")
    (own_tmp / f"farm-triton-cache-{os.getuid()}").chmod(0o777)
    with pytest.raises(UnsafeFolder, match="may be written by other users"):
        host_triton_cache()


@pytest.mark.parametrize("made", ["by another user", "as a link", "as a file", "writable by others"])
def test_a_folder_this_user_does_not_alone_control_is_refused(own_tmp, made):
    folder = own_tmp / f"farm-things-{os.getuid()}"
    target = own_tmp / "elsewhere"
    target.mkdir()
    if made == "as a link":
        folder.symlink_to(target)
    elif made == "as a file":
        folder.write_text("")
    elif made == "writable by others":
        folder.mkdir()
        folder.chmod(0o757)  # an earlier tool's, made with a loose umask
    else:
        if os.geteuid() != 0:
            pytest.skip("making a folder another user's needs root")
        folder.mkdir()
        os.chown(folder, 65534, 65534)  # nobody's, made before the farm's first worker
    message = (
        "may be written by other users" if made == "writable by others" else "not a folder of this user's"
    )
    with pytest.raises(UnsafeFolder, match=message):
        private_folder("farm-things")
    assert list(target.iterdir()) == []


def test_a_worker_started_with_a_triton_cache_dir_does_not_touch_the_shared_one(own_tmp, monkeypatch):
    """The worker asks for the shared cache only when TRITON_CACHE_DIR is unset: a node that sets its
    own is not refused for a folder it never uses."""
    from farm import worker

    (own_tmp / f"farm-triton-cache-{os.getuid()}").symlink_to(own_tmp)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(own_tmp / "mine"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    w = worker.GpuWorker([], backend="interpreter")
    assert os.environ["TRITON_CACHE_DIR"] == str(own_tmp / "mine") and w.backend == "interpreter"
    monkeypatch.delenv("TRITON_CACHE_DIR")
    with pytest.raises(UnsafeFolder):
        worker.GpuWorker([], backend="interpreter")

"""The folders a host's workers share (`farm.host_folders.private_folder`): the plugins they import
and the Triton cache they load kernels from. One per purpose and user, made private; one that
another user controls is refused, whatever the purpose."""

import os
import stat
import tempfile
from types import SimpleNamespace

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


def test_a_worker_uses_the_shared_cache_only_when_triton_cache_dir_is_unset(own_tmp, monkeypatch):
    """A node that sets its own TRITON_CACHE_DIR is not refused for a folder it never uses; where the
    shared one is refused, the worker's first call (info) raises the UserError, and the driver
    (`farm.gpu_wait.await_workers`) reports that rather than Ray's dead-actor traceback."""
    from farm import worker

    (own_tmp / f"farm-triton-cache-{os.getuid()}").symlink_to(own_tmp)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(own_tmp / "mine"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    started = worker.GpuWorker([], backend="interpreter")
    assert started.startup_error is None and os.environ["TRITON_CACHE_DIR"] == str(own_tmp / "mine")
    monkeypatch.delenv("TRITON_CACHE_DIR")
    refused = worker.GpuWorker([], backend="interpreter")
    with pytest.raises(UnsafeFolder, match="not a folder of this user's"):
        refused.info()


def test_the_driver_reports_a_workers_startup_error_as_it_is():
    import ray

    from farm.cluster import WorkerHandle
    from farm.gpu_wait import await_workers

    error = UnsafeFolder("/tmp/farm-triton-cache-0 is not a folder of this user's: remove it")
    raised = ray.exceptions.RayTaskError("GpuWorker.info", "Traceback ...", error).as_instanceof_cause()

    class Raising:  # ray.get of the workers' info() calls, one of which raised `error`
        exceptions = ray.exceptions

        def get(self, refs, timeout):
            raise raised

    actor = SimpleNamespace(info=SimpleNamespace(remote=lambda: None))
    with pytest.raises(UnsafeFolder) as caught:  # the dual RayTaskError is an UnsafeFolder too: the type
        await_workers(Raising(), [WorkerHandle(actor)])
    assert type(caught.value) is UnsafeFolder and str(caught.value) == str(error)

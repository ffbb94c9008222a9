"""The folders a host's workers share in the temp dir: one per purpose, user and host.

Both hold code a worker runs: the plugins it imports (farm/plugins.py) and the compiled kernels
Triton loads from its disk cache (farm/worker.py). In a shared /tmp another user can make a folder
of the expected name first, or a link to one of theirs, and its files would then run as this user;
so such a folder, or one that others may write into, is refused, with a message saying what to do.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from farm.errors import UserError


class UnsafeFolder(UserError):
    """A shared folder that this user does not alone control."""


def private_folder(purpose: str) -> Path:
    """`$TMPDIR/<purpose>-<uid>`, made 0700 if missing; refused unless it is a real folder owned by this
    user that neither group nor others may write into."""
    folder = Path(tempfile.gettempdir()) / f"{purpose}-{os.getuid()}"
    with contextlib.suppress(FileExistsError):  # a file of that name, or a link to one: refused below
        folder.mkdir(mode=0o700, exist_ok=True)
    found = folder.lstat()  # the entry itself: a link is not followed
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise UnsafeFolder(f"{folder} is not a folder of this user's: remove it, or set TMPDIR elsewhere")
    if found.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeFolder(f"{folder} may be written by other users: chmod go-w it, or set TMPDIR elsewhere")
    return folder

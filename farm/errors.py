"""Errors a user can fix. The CLI prints the message and exits with status 2; nothing is written."""


class UserError(Exception):
    """Bad input: a spec, a plugin, a variant name, an option."""


class WriteFailed(Exception):
    """A write to the results database failed mid-sweep (a full disk, an I/O error, a read-only file or
    server). The message is one line naming the database and, for a file, the free space needed; the
    sweep is left `interrupted` with its claims released where the database still takes that much.
    The CLI prints it and exits 3: some points were not measured, and the same command resumes."""

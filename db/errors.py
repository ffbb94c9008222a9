"""Errors a user can act on. The CLI prints the message and exits with status 2."""


class DatabaseError(Exception):
    """The results database cannot be opened, created or used as asked (message says why and what to do)."""

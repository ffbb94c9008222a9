"""Errors a user can fix. The CLI prints the message and exits with status 2; nothing is written."""


class UserError(Exception):
    """Bad input: a spec, a plugin, a variant name, an option."""

"""Failures of the views a user can act on (the CLI prints the message and exits 1)."""


class AnalyticsError(RuntimeError):
    """E.g. an episode that is not in the log, or a time that cannot be parsed; the message says
    what to do next."""

"""The composition root: every command of ``webgym`` and the loops they assemble.

Nothing below this package imports it. Each module is one command group; ``commands.main`` is the
``webgym`` entry point and registers them all.
"""

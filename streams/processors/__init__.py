"""The Faust stream processors (Faust calls them agents), one module per input stream.

Each module's ``register`` wires its agent on the app; ``judge`` consumes ``webgym.trajectories``.
"""

"""Faust agents, one module per input stream; each module's ``register`` wires its agent."""

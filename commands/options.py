"""Command-line options that several commands take, each declared once.

A command names them as the type of a parameter and gives the default there when the commands'
defaults differ: ``publish_every: PublishEvery = 4``. An option whose help text says something
particular to one command stays declared in that command.
"""

from __future__ import annotations

from typing import Annotated

import typer

# `webgym check`, `webgym stats`: the run whose episodes a report covers.
RunFilter = Annotated[
    str | None,
    typer.Option("--run", help="only this run's episodes (episode ids are <run id>-<n>)"),
]

# `webgym learner`, `webgym experiment learn`: how often the learner publishes a version.
PublishEvery = Annotated[int, typer.Option(min=1, help="optimiser steps per version")]

# `webgym learner`, `webgym experiment learn`: what each optimiser step trains on.
FreshPerStep = Annotated[
    int, typer.Option(min=1, help="new samples per optimiser step (whole successful trajectories)")
]
ReplayPerStep = Annotated[
    int, typer.Option(min=0, help="recency-weighted window samples replayed per optimiser step")
]

# `webgym worker browser`, `webgym worker policy`: each kind of worker has its own default group.
ConsumerGroup = Annotated[str, typer.Option(help="consumer group; one per fleet")]

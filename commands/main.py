"""The ``webgym`` command line: one root app that names every command and group once.

Each command lives in a module of this package and is imported only when it runs, so
``webgym --help`` and a light command never load PyTorch, Playwright or Faust; the help lines are
read from the modules' source. Every function command is wrapped in
``commands.errors.user_errors``, which sorts the known failures into one line and exit code 1.
"""

from __future__ import annotations

import ast
import importlib
from functools import cache
from pathlib import Path
from typing import Any

import click
import typer
from typer.core import TyperGroup

from commands.errors import user_errors

# name -> "module:attribute" (a function is a command, a Typer app is a group), in help order.
COMMANDS: dict[str, str] = {
    # The local stack and the main job.
    "up": "commands.stack:up",
    "down": "commands.stack:down",
    "status": "commands.stack:status",
    "run": "commands.run:run",
    "episodes": "commands.episodes:episodes_app",
    "smoke": "commands.stack:smoke",
    "topics": "commands.topics:topics_app",
    "sites": "commands.sites:sites_app",
    "tasks": "commands.tasks:tasks_app",
    "worker": "commands.workers:worker_app",
    # Learning: the learner, evaluation, experiments, checkpoints and published versions.
    "learner": "commands.learner:learner",
    "eval": "commands.learning:eval_command",
    "experiment": "commands.learning:experiment_app",
    "model": "commands.learner:model_app",
    "policy": "commands.policy:policy_app",
    "bench": "commands.bench:bench_app",
    # Views of the log.
    "replay": "commands.replay:replay",
    "rescore": "commands.rescore:rescore",
    "stats": "commands.stats:stats",
    "dashboard": "commands.dashboard:dashboard",
    "check": "commands.check:check",
}


def load_command(name: str) -> click.Command:
    """Import the command's module and build its click command (errors sorted for functions)."""
    module, attribute = COMMANDS[name].split(":")
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        return typer.main.get_group(target)
    single = typer.Typer()
    single.command(name)(user_errors(target))
    return typer.main.get_command(single)


@cache
def short_help(name: str) -> str:
    """The first line of the command's docstring, or its group's ``help=``, read without import."""
    module, attribute = COMMANDS[name].split(":")
    path = Path(__file__).parent / f"{module.rsplit('.', 1)[1]}.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == attribute:
            return first_sentence(ast.get_docstring(node) or "")
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == attribute for t in node.targets
        ):
            keywords = {k.arg: k.value for k in getattr(node.value, "keywords", [])}
            if "help" in keywords:
                return first_sentence(str(ast.literal_eval(keywords["help"])))
    return ""


def first_sentence(text: str) -> str:
    paragraph = " ".join(text.split("\n\n")[0].split())
    return paragraph.split(". ")[0].rstrip(".") + "."


class LazyCommands(TyperGroup):
    """The root group: lists the table's commands and builds one only when it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: Any) -> None:
        rows = [(name, short_help(name)) for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    cls=LazyCommands,
    help="webgym-streams: training environment and online RL loop for visual web agents, "
    "event-sourced on Apache Kafka. Start with `webgym up`, then `webgym run`.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@app.callback()
def _root() -> None:
    """webgym-streams: the training environment and online RL loop for visual web agents."""


def main() -> None:
    app()


if __name__ == "__main__":
    main()

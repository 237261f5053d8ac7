"""`webgym replay`: an episode rebuilt from the log, as a page, a server or a rerun; or a list
of episodes to choose from.

Imported when the CLI starts: only Typer and the standard library at module level; Kafka,
Playwright, Pillow and aiohttp are imported when the command runs.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Column, Table

from analytics.errors import AnalyticsError
from analytics.replay import load_replay
from analytics.replay_draw import describe
from analytics.replay_html import render_html
from analytics.replay_list import EpisodeFilter, list_episodes, list_row
from analytics.replay_serve import serve_replay
from analytics.rerun import rerun_episode
from analytics.times import parse_since
from infra.settings import load_settings

DEFAULT_PORT = 8766


def replay(
    episode_id: Annotated[
        str | None,
        typer.Argument(help="the episode to replay, e.g. run20261130005501ef03-000002"),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="write the page to this HTML file (default: replay-<episode>.html)"),
    ] = None,
    serve: Annotated[
        bool, typer.Option("--serve", help="serve the page on 127.0.0.1 until Ctrl-C")
    ] = False,
    port: Annotated[int, typer.Option(min=1, max=65535, help="--serve: the port")] = DEFAULT_PORT,
    rerun: Annotated[
        bool,
        typer.Option(
            "--rerun",
            help="re-execute the recorded actions in a fresh headless Chromium and report the "
            "first step whose page (URL, title, screenshot) differs from the recording",
        ),
    ] = False,
    sites: Annotated[
        int, typer.Option(min=1, help="--rerun: practice-web sites the run generated")
    ] = 50,
    seed: Annotated[int, typer.Option(help="--rerun: the run's practice-web seed")] = 0,
    list_: Annotated[
        bool, typer.Option("--list", help="list episodes (filters below) instead of replaying")
    ] = False,
    task: Annotated[str | None, typer.Option(help="--list: task id contains this")] = None,
    site: Annotated[str | None, typer.Option(help="--list: website contains this")] = None,
    reward: Annotated[
        str | None, typer.Option(help="--list: reward test, e.g. 1, '>=0.5', '<1'")
    ] = None,
    success: Annotated[
        bool | None,
        typer.Option(
            "--success/--failure",
            help="--list: only episodes on the success stream / judged and not successful",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="--list: started at or after: a duration ago (30m, 2h, 1d) or an ISO time "
            "(2026-11-30T14:05, UTC unless it names a zone)"
        ),
    ] = None,
    until: Annotated[str | None, typer.Option(help="--list: started before (same forms)")] = None,
    limit: Annotated[
        int, typer.Option(min=0, help="--list: show the newest N matches (0: all)")
    ] = 50,
    json_: Annotated[
        bool, typer.Option("--json", help="--list: print JSON rows instead of a table")
    ] = False,
) -> None:
    """Rebuild an episode from the Kafka log alone: every step's screenshot with the action drawn
    on it, the model's thought, action and memory, timings and policy version, and the reward
    with the judge's per-fact verdicts.

    Writes one self-contained HTML file (--out), serves it (--serve) or re-executes the episode
    in a fresh browser (--rerun). Find episode ids with `webgym replay --list` (by --task,
    --site, --reward, --success/--failure, --since/--until). Reads the topics of
    WEBGYM_TOPIC_PREFIX; changes nothing in the log.
    """

    console = Console()
    status = Console(stderr=True)
    settings = _settings()
    if list_:
        _list(console, status, settings, task, site, reward, success, since, until, limit, json_)
        return
    if episode_id is None:
        raise AnalyticsError(
            "name an episode to replay; find episode ids with `webgym replay --list`"
        )

    with status.status(f"reading {episode_id} from the log..."):
        episode = load_replay(settings, episode_id)
    status.print(
        f"{episode_id}: {len(episode.steps)} steps, {episode.state}"
        + (f", reward {episode.reward:g}" if episode.reward is not None else "")
        + f" (from the {episode.source})",
        highlight=False,
    )
    if out is not None or not (serve or rerun):
        target = out or Path(f"replay-{episode_id}.html")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_html(episode), encoding="utf-8")
        console.print(f"replay written to {target}", highlight=False)
    if rerun:
        _rerun(console, status, settings, episode, sites, seed)
    if serve:
        serve_replay(
            settings,
            episode_id,
            "127.0.0.1",
            port,
            lambda url: console.print(
                f"serving the replay of {episode_id} at {url} (Ctrl-C stops)"
            ),
        )


def _settings():

    return load_settings()


# In the order they are given room: a narrow terminal drops the last ones, never cuts a cell.
_LIST_COLUMNS = (
    "episode",
    "state",
    "steps",
    "reward",
    "end",
    "task",
    "started (UTC)",
    "difficulty",
)
_JUSTIFY = {"steps": "right", "reward": "right"}


def columns_that_fit(rows: list[dict[str, str]], width: int) -> list[str]:
    """The leading columns of ``_LIST_COLUMNS`` whose widest cells fit in ``width`` characters
    (with the table's borders and padding); the episode id is always shown."""
    chosen: list[str] = []
    used = 1  # the table's left border
    for name in _LIST_COLUMNS:
        cell = max([len(name), *(len(row[name]) for row in rows)])
        if chosen and used + cell + 3 > width:
            continue
        chosen.append(name)
        used += cell + 3  # a space each side and a border
    return chosen


def _list(console, status, settings, task, site, reward, success, since, until, limit, as_json):

    wanted = EpisodeFilter(
        task=task,
        site=site,
        reward=reward,
        success=success,
        since_ms=parse_since(since),
        until_ms=parse_since(until),
    )
    with status.status(f"reading episodes from {settings.topic('episodes')}..."):
        views = list_episodes(settings, wanted)
    shown = views[-limit:] if limit else views
    if as_json:
        for view in shown:  # one JSON object a line, unstyled and never wrapped
            typer.echo(json.dumps(list_row(view)))
        return
    rows = []
    for view in shown:
        started = (
            datetime.datetime.fromtimestamp(view.started_ts / 1000, tz=datetime.UTC).strftime(
                "%Y-%m-%d %H:%M:%S"
            )
            if view.started_ts
            else "-"
        )
        reward = "-" if view.reward is None else f"{view.reward:g}"
        rows.append(
            {
                "episode": view.episode_id,
                "state": view.state,
                "steps": str(list_row(view)["steps"]),
                "reward": reward,
                "end": f"{view.end_kind}: {view.reason}" if view.end_kind else "-",
                "task": view.task_id,
                "started (UTC)": started,
                "difficulty": view.difficulty,
                "_success": view.success,
            }
        )
    columns = columns_that_fit(rows, console.width)
    table = Table(
        *(Column(name, no_wrap=True, justify=_JUSTIFY.get(name, "left")) for name in columns)
    )
    for row in rows:
        colour = "green" if row["_success"] else "red"
        table.add_row(
            *(
                f"[{colour}]{row[name]}[/]" if name == "reward" and row[name] != "-" else row[name]
                for name in columns
            )
        )
    console.print(table)
    left_out = [name for name in _LIST_COLUMNS if name not in columns]
    if left_out:
        console.print(
            f"[dim]({', '.join(left_out)} left out at {console.width} columns: widen the "
            "terminal or use --json)[/]"
        )
    more = f" (the newest {len(shown)} shown; --limit 0 for all)" if len(shown) < len(views) else ""
    console.print(
        f"{len(views)} episodes match{more}. Replay one with `webgym replay EPISODE_ID`.",
        highlight=False,
    )


def _rerun(console, status, settings, episode, sites, seed):

    with status.status("starting Chromium and the practice web...") as spinner:
        report = asyncio.run(
            rerun_episode(
                settings, episode, sites, seed, progress=lambda line: spinner.update(line)
            )
        )
    table = Table("step", "action", "URL", "screenshot", "result")
    for check in report.checks:
        if check.screenshot is None:
            shot = "-"
        elif check.screenshot.identical:
            shot = "identical"
        else:
            shot = f"{check.screenshot.changed_share:.3%} changed"
        table.add_row(
            str(check.step),
            "open start page" if check.action is None else describe(check.action),
            check.rerun_url,
            shot,
            "[green]same[/]" if check.matches else f"[red]{'; '.join(check.differences)}[/]",
        )
    console.print(table)
    first = report.first_difference
    if first is not None:
        console.print(
            f"[red]first difference at step {first.step}[/]: {'; '.join(first.differences)}",
            highlight=False,
        )
    if report.stopped:
        console.print(f"[red]the rerun stopped[/] at {report.stopped}", highlight=False)
    if report.all_match:
        console.print(
            f"[green]all {len(report.checks)} steps match[/] the recording "
            f"(step 0 is the first navigation)",
            highlight=False,
        )

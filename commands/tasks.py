"""``webgym tasks``: load WebGym task files onto the tasks topic, split them by website, count them.

Registered by ``commands.main`` as ``app.add_typer(tasks_app, name="tasks")``. Known failures print
what went wrong and what to do next, and exit 1 (the same contract as ``commands.main``, whose
``user_errors`` cannot be imported here: ``commands.main`` imports this module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column, Table

from commands.errors import console, errors, user_errors
from infra.settings import SettingsError, load_settings
from sites.tasks import task_set_name
from tasks.decompose import decompose as decompose_tasks
from tasks.llm_client import LLMConfig
from tasks.miniwob import DEFAULT_SEEDS, HELDOUT_SEED_BASE, MARKS_SOLVABLE, instance_sets
from tasks.practice_web import practice_web_tasks
from tasks.publish import publish_tasks, read_published_tasks
from tasks.rubrics import generate_rubrics
from tasks.sets import TaskSetError, check_name, name_for_file, set_sizes, task_sets_of
from tasks.split import SplitError, check_split, split_by_website, website_key
from tasks.stats import stats_tables, task_stats
from tasks.webgym_format import LoadResult, TaskFileError, load_tasks, write_webgym_jsonl

tasks_app = typer.Typer(
    help="Task sets in the WebGym format (.jsonl, .jsonl.gz, .parquet): validate and publish "
    "them to the compacted tasks topic, split them by website for out-of-distribution "
    "evaluation, and count them. Start with `webgym tasks load FILE`.",
    no_args_is_help=True,
    add_completion=False,
)

MAX_ERRORS_SHOWN = 50

TaskFile = Annotated[
    Path, typer.Argument(help="WebGym task file: .jsonl, .jsonl.gz or .parquet", show_default=False)
]
Strict = Annotated[
    bool,
    typer.Option(help="refuse the whole file if any line is bad (default: skip bad lines)"),
]


@tasks_app.command()
@user_errors
def load(
    file: TaskFile,
    strict: Strict = False,
    task_set: Annotated[
        str | None,
        typer.Option(
            help="the task set the file's tasks join (default: a line's own task_set, else the "
            "file's name without extensions); its split markers give NAME/train and NAME/test",
            show_default=False,
        ),
    ] = None,
    max_bad: Annotated[
        int,
        typer.Option(
            min=0,
            help="bad lines accepted before the command exits 1 (the good lines are "
            "published either way)",
        ),
    ] = 0,
) -> None:
    """Validate a WebGym task file and publish its tasks to the compacted tasks topic.

    Every task joins a named task set (--task-set; default: the file's name, e.g. webgym_tasks
    for webgym_tasks.jsonl.gz), which `webgym run --task-set NAME` draws from; tasks with a split
    marker are also in NAME/train or NAME/test. Only tasks that are new, or differ from the
    version on the topic, are produced: loading the same file again changes nothing (loading it
    under another set name moves its tasks to that set). Tasks on the topic that the file lacks
    stay. Bad lines are listed (file:line, field, message) and skipped, and the command exits 1
    when there are more than --max-bad of them (default 0), so a script can tell; with --strict
    nothing is published while any line is bad, and a file without one valid task is an error.
    Needs the local stack and its topics: run `webgym up` first.
    """

    settings = load_settings()
    if task_set is not None:
        check_name(task_set)
    result = _read(file, strict)
    _print_line_errors(result)
    if strict and result.errors:
        errors.print(
            f"[bold red]error:[/] {len(result.errors)} of {_lines(result.rows)} bad, so nothing "
            "was published (--strict). Fix the lines listed above and load the file again, or "
            "drop --strict to publish the good lines."
        )
        raise typer.Exit(1)
    if not result.tasks:
        what = (
            f"none of its {_lines(result.rows)} is a valid task (listed above)"
            if result.rows
            else "it holds no task"
        )
        raise TaskFileError(
            f"{file}: {what}, so nothing was published. Fix the file and load it again."
        )
    default_set = task_set or name_for_file(file)
    tasks = [
        {**task, "task_set": task_set or task.get("task_set") or default_set}
        for task in result.tasks
    ]
    with _bar(MofNCompleteColumn()) as progress:
        bar = progress.add_task("publishing", total=None)
        counts = publish_tasks(
            settings,
            tasks,
            progress=lambda done, total: progress.update(bar, completed=done, total=total),
            report=lambda line: progress.update(bar, description=escape(line)),
        )
        done = max(counts.produced, 1)
        progress.update(bar, description="published", total=done, completed=done)
    console.print(
        f"[green]{counts.new} new, {counts.changed} changed, {counts.unchanged} unchanged[/] "
        f"tasks of {file} on {settings.topic('tasks')}",
        highlight=False,
    )
    sizes = ", ".join(f"{escape(name)} ({count})" for name, count in set_sizes(tasks).items())
    console.print(f"task sets: {sizes}", highlight=False)
    if result.errors:
        console.print(
            f"[yellow]{result.skipped} of {_lines(result.rows)} skipped[/] (listed above): fix "
            "them and load the file again (only the fixed tasks will be published), or use "
            "--strict to refuse files with bad lines.",
            highlight=False,
        )
    if result.skipped > max_bad:
        errors.print(
            f"[bold red]error:[/] {_lines(result.skipped)} bad, more than --max-bad {max_bad}; "
            "the good tasks were published. Exit 1 so that scripts can tell: raise --max-bad to "
            "accept that many.",
            highlight=False,
        )
        raise typer.Exit(1)


@tasks_app.command()
@user_errors
def stats(
    file: Annotated[
        Path | None,
        typer.Argument(
            help="task file (.jsonl, .jsonl.gz, .parquet); default: the tasks on the topic",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Count tasks by domain, subdomain, difficulty, split and source.

    From a task file, or (no FILE) from the tasks published on the tasks topic (then the local
    stack must run: `webgym up`). Lines of the file that do not validate are skipped and counted.
    """
    if file is None:
        settings = load_settings()
        with console.status(f"reading {settings.topic('tasks')}..."):
            tasks = read_published_tasks(settings)
        origin = settings.topic("tasks")
    else:
        result = _read(file, strict=False)
        _print_line_errors(result)
        if result.errors:
            console.print(
                f"[yellow]{_lines(result.skipped)} not counted[/] (listed above)", highlight=False
            )
        tasks, origin = result.tasks, str(file)
    figures = task_stats(tasks)
    console.print(
        f"[bold]{figures.tasks} tasks[/] from {figures.websites} websites ({origin})",
        highlight=False,
    )
    for table in stats_tables(figures):
        console.print(table)


@tasks_app.command()
@user_errors
def sets() -> None:
    """List the task sets on the tasks topic, with their tasks and websites.

    These are the names `webgym run --task-set` accepts (a set's split markers make NAME/train
    and NAME/test). Needs the local stack: `webgym up`.
    """

    settings = load_settings()
    with console.status(f"reading {settings.topic('tasks')}..."):
        tasks = read_published_tasks(settings)
    websites: dict[str, set[str]] = {}
    for task in tasks:
        for name in task_sets_of(task):
            websites.setdefault(name, set()).add(website_key(task["website"]))
    table = Table("task set", "tasks", "websites", title=settings.topic("tasks"))
    for name, count in set_sizes(tasks).items():
        table.add_row(escape(name), str(count), str(len(websites.get(name, ()))))
    console.print(table)
    unassigned = sum(1 for task in tasks if not task.get("task_set"))
    if unassigned:
        console.print(
            f"[yellow]{unassigned} tasks in no set[/] (published before task sets existed): no run "
            "draws them; load their file again to give them one.",
            highlight=False,
        )


@tasks_app.command()
@user_errors
def miniwob(
    pages: Annotated[
        str,
        typer.Option(
            help="comma-separated MiniWoB++ page names (default: the 22 the heuristic policy "
            "solves)",
            show_default=False,
        ),
    ] = "",
    train_seeds: Annotated[
        int, typer.Option(min=1, help="training instances per page: seeds 0..N-1")
    ] = DEFAULT_SEEDS,
    heldout_seeds: Annotated[
        int,
        typer.Option(min=1, help=f"held-out instances per page: seeds {HELDOUT_SEED_BASE:_}+"),
    ] = DEFAULT_SEEDS,
    prefix: Annotated[
        str,
        typer.Option(help="publish the sets PREFIX/train and PREFIX/heldout"),
    ] = "miniwob",
) -> None:
    """Publish MiniWoB++ instances (page + seed) as the sets miniwob/train and miniwob/heldout.

    Each task is one instance: the browser worker seeds the page with it, so a task id always
    shows the same problem. Held-out seeds never overlap training seeds. With another --prefix,
    task ids carry the set's name, so the sets never share a task with miniwob/train. Then run
    `webgym run --task-set miniwob/train` (or PREFIX/train). Needs the local stack: `webgym up`.
    """

    settings = load_settings()
    check_name(prefix)
    names = [name.strip() for name in pages.split(",") if name.strip()] or list(MARKS_SOLVABLE)
    try:
        tasks = instance_sets(names, train_seeds, heldout_seeds, prefix)
    except ValueError as exc:
        raise TaskSetError(str(exc)) from None
    with console.status(f"publishing {len(tasks)} MiniWoB++ instances..."):
        counts = publish_tasks(settings, tasks)
    console.print(
        f"[green]{counts.new} new, {counts.changed} changed, {counts.unchanged} unchanged[/] "
        f"instances of {len(names)} pages: {prefix}/train ({len(names) * train_seeds}), "
        f"{prefix}/heldout ({len(names) * heldout_seeds}) on {settings.topic('tasks')}",
        highlight=False,
    )


@tasks_app.command("practice-web")
@user_errors
def practice_web(
    seed: Annotated[int, typer.Option(help="the practice web's seed: sites and tasks")] = 0,
    sites: Annotated[
        int, typer.Option(min=1, help="sites of that seed whose tasks to publish")
    ] = 50,
) -> None:
    """Publish the practice web's tasks as the set practice-web/seed-<SEED> (and its split by
    website, .../train and .../test).

    The same tasks `webgym run --seed SEED --sites SITES` publishes; publishing them again changes
    nothing. Serve the pages with `webgym sites serve --seed SEED --count SITES` (or more sites),
    then start episodes with `webgym episodes start --task-set practice-web/seed-<SEED>`. Needs
    the local stack: `webgym up`.
    """

    settings = load_settings()
    tasks = practice_web_tasks(seed=seed, count=sites)
    name = task_set_name(seed)
    with console.status(f"publishing {len(tasks)} practice-web tasks..."):
        counts = publish_tasks(settings, tasks)
    sizes = set_sizes(tasks)
    console.print(
        f"[green]{counts.new} new, {counts.changed} changed, {counts.unchanged} unchanged[/] "
        f"tasks of {sites} sites: {name} ({sizes[name]}), {name}/train "
        f"({sizes.get(name + '/train', 0)}), {name}/test ({sizes.get(name + '/test', 0)}) on "
        f"{settings.topic('tasks')}",
        highlight=False,
    )


@tasks_app.command()
@user_errors
def split(
    file: TaskFile,
    train: Annotated[
        Path, typer.Option(help="where to write the train split (.jsonl or .jsonl.gz)")
    ],
    test: Annotated[Path, typer.Option(help="where to write the test split (.jsonl or .jsonl.gz)")],
    test_fraction: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="share of websites that go to test")
    ] = 0.2,
    seed: Annotated[int, typer.Option(help="which websites go to test: same seed, same split")] = 0,
    strict: Strict = False,
    ignore_markers: Annotated[
        bool,
        typer.Option(
            "--ignore-markers",
            help="split every task by website, even those the file marks (split, distribution, "
            "is_ood)",
        ),
    ] = False,
) -> None:
    """Split a task file by website for out-of-distribution evaluation, and check the split.

    Whole websites go to test (hosts compared without scheme, path or "www."), so no test website
    is ever trained on. The file's own split markers (split, distribution, is_ood: the WebGym
    data's split) are kept: a marked task, and every task of its website, stays in its split, and
    only unmarked websites are drawn (--test-fraction of them); --ignore-markers draws every
    website. Both files are written as WebGym JSON Lines with the split field set, read back and
    checked; the command fails naming any website found in both.
    """
    if len({file.resolve(), train.resolve(), test.resolve()}) < 3:
        raise SplitError("FILE, --train and --test must be three different files")
    result = _read(file, strict)
    _print_line_errors(result)
    if strict and result.errors:
        errors.print(
            "[bold red]error:[/] bad lines (listed above), so nothing was written (--strict). "
            "Fix them and split again, or drop --strict to split the good lines."
        )
        raise typer.Exit(1)
    train_tasks, test_tasks = split_by_website(
        result.tasks, test_fraction, seed, honour_markers=not ignore_markers
    )
    marked = sum(1 for task in result.tasks if task.get("split") in ("train", "test"))
    if marked and not ignore_markers:
        console.print(
            f"{marked} tasks carry the file's own split marker: kept (with their websites); "
            "--ignore-markers splits them by website instead",
            highlight=False,
        )
    elif marked:
        console.print(f"[yellow]{marked} split markers of the file ignored[/] (--ignore-markers)")
    write_webgym_jsonl(train, train_tasks)
    write_webgym_jsonl(test, test_tasks)
    for name, tasks, path in (("train", train_tasks, train), ("test", test_tasks, test)):
        websites = len({website_key(task["website"]) for task in tasks})
        console.print(f"{name:>5}: {len(tasks)} tasks from {websites} websites -> {path}")
    if result.errors:
        console.print(
            f"[yellow]{_lines(result.skipped)} left out[/] (listed above)", highlight=False
        )
    _check_files(train, test)


@tasks_app.command("check-split")
@user_errors
def check_split_command(
    train: Annotated[Path, typer.Argument(help="the train task file", show_default=False)],
    test: Annotated[Path, typer.Argument(help="the test task file", show_default=False)],
) -> None:
    """Check that no website has tasks in both a train and a test file.

    Exits 1 naming every website found in both (with example task ids), or if a line of either
    file cannot be read (the check would be incomplete).
    """
    _check_files(train, test)


def _check_files(train: Path, test: Path) -> None:
    loaded = [_read(train, strict=False), _read(test, strict=False)]
    for result in loaded:
        _print_line_errors(result)
    violations = check_split(loaded[0].tasks, loaded[1].tasks)
    if violations:
        table = Table("website", "train tasks", "test tasks", "e.g. train / test task")
        for violation in violations:
            table.add_row(
                violation.website,
                str(len(violation.train_task_ids)),
                str(len(violation.test_task_ids)),
                f"{violation.train_task_ids[0]} / {violation.test_task_ids[0]}",
            )
        console.print(table)
        websites = ", ".join(violation.website for violation in violations)
        errors.print(
            f"[bold red]split check failed:[/] websites in both splits: "
            f"{escape(websites)}. Move each website's tasks to one side, or split again with "
            "`webgym tasks split`.",
            highlight=False,
        )
        raise typer.Exit(1)
    if any(result.errors for result in loaded):
        errors.print(
            "[bold red]split check incomplete:[/] the bad lines listed above were not checked; "
            "fix them and check again.",
            highlight=False,
        )
        raise typer.Exit(1)
    console.print(
        f"[green]split ok:[/] no website in both {train} ({len(loaded[0].tasks)} tasks) and "
        f"{test} ({len(loaded[1].tasks)} tasks)",
        highlight=False,
    )


LLMBaseUrl = Annotated[
    str | None,
    typer.Option(help="OpenAI-compatible server for the LLM steps, e.g. http://127.0.0.1:8000/v1"),
]
LLMModel = Annotated[str | None, typer.Option(help="model name the server serves")]
LLMKey = Annotated[
    str | None,
    typer.Option(
        envvar="WEBGYM_LLM_API_KEY", help="API key (env WEBGYM_LLM_API_KEY, else OPENAI_API_KEY)"
    ),
]
Out = Annotated[Path, typer.Argument(help="where to write the result (.jsonl)", show_default=False)]


def _llm(base_url: str | None, model: str | None, api_key: str | None, required: bool):

    if base_url and model:
        return LLMConfig(base_url, model, api_key=api_key)
    if base_url or model or required:
        raise SettingsError(
            "give both --llm-base-url and --llm-model (an OpenAI-compatible server, e.g. vLLM's "
            "`vllm serve MODEL` at http://127.0.0.1:8000/v1)"
        )
    return None


@tasks_app.command()
@user_errors
def decompose(
    file: TaskFile,
    out: Out,
    max_per_task: Annotated[int, typer.Option(min=1, help="subsets tried per task")] = 6,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMKey = None,
) -> None:
    """Write easier subtasks built from proper subsets of each task's fact groups.

    A task with at least two fact groups, one of them with three or more facts, yields subtasks
    (parent_task_id set, one difficulty lower). Practice-web tasks are decomposed from their
    ground truth; real-website tasks need an LLM (--llm-base-url, --llm-model) to rewrite the
    instruction, and every rewrite is validated. Rejected subsets are listed with the reason.
    """

    rewriter = _llm(llm_base_url, llm_model, llm_api_key, required=False)
    result = _read(file, strict=False)
    _print_line_errors(result)
    with _bar(MofNCompleteColumn()) as progress:
        bar = progress.add_task("decomposing", total=len(result.tasks))
        decomposed = decompose_tasks(
            result.tasks,
            rewriter,
            max_per_task,
            on_task=lambda task_id: progress.advance(bar),
        )
    write_webgym_jsonl(out, decomposed.subtasks)
    if decomposed.rejected:
        table = Table("task", "fact groups", Column("reason", overflow="fold"), title="rejected")
        for rejected in decomposed.rejected[:MAX_ERRORS_SHOWN]:
            table.add_row(
                escape(rejected.task_id),
                "+".join(rejected.fact_group_ids) or "(task)",
                escape(rejected.reason),
            )
        console.print(table)
    console.print(
        f"[green]{len(decomposed.subtasks)} subtasks[/] from {len(result.tasks)} tasks written to "
        f"{escape(str(out))}; {len(decomposed.skipped)} tasks too simple to decompose, "
        f"{len(decomposed.rejected)} subsets rejected, {len(decomposed.duplicates)} duplicates "
        "dropped. Publish them with `webgym tasks load`.",
        highlight=False,
    )


@tasks_app.command()
@user_errors
def rubrics(
    file: TaskFile,
    out: Out,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMKey = None,
) -> None:
    """Give tasks that come without a rubric one, proposed by an LLM and validated.

    Tasks that have a rubric pass through unchanged. A proposed rubric must be 1-8 fact groups
    (ids g1, g2, ...) of 1-10 distinct, non-empty facts; a malformed one is retried, then the
    task is listed as rejected with the reason and left out of OUT.
    """

    config = _llm(llm_base_url, llm_model, llm_api_key, required=True)
    with _bar(TaskProgressColumn()) as progress:
        bar = progress.add_task(f"reading {escape(file.name)}", total=1.0)
        result = load_tasks(
            file,
            progress=lambda share: progress.update(bar, completed=share),
            rubric_optional=True,
        )
    _print_line_errors(result)
    with _bar(MofNCompleteColumn()) as progress:
        bar = progress.add_task("asking for rubrics", total=len(result.tasks))
        generated = generate_rubrics(
            result.tasks, config, on_task=lambda task_id: progress.advance(bar)
        )
    write_webgym_jsonl(out, generated.tasks_with_rubrics)
    if generated.rejected:
        table = Table("task", Column("reason", overflow="fold"), title="rejected")
        for rejected in generated.rejected[:MAX_ERRORS_SHOWN]:
            table.add_row(escape(rejected.task_id), escape(rejected.reason))
        console.print(table)
    console.print(
        f"[green]{len(generated.tasks_with_rubrics)} tasks[/] written to {escape(str(out))}; "
        f"{len(generated.rejected)} rejected (listed above).",
        highlight=False,
    )


def _bar(*columns: Any) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        *columns,
        TimeElapsedColumn(),
        console=console,
    )


def _read(file: Path, strict: bool) -> LoadResult:
    with _bar(TaskProgressColumn()) as progress:
        bar = progress.add_task(f"reading {escape(file.name)}", total=1.0)
        result = load_tasks(
            file, strict=strict, progress=lambda share: progress.update(bar, completed=share)
        )
        progress.update(
            bar, completed=1.0, description=f"read {escape(file.name)}: {_lines(result.rows)}"
        )
    return result


def _print_line_errors(result: LoadResult) -> None:
    if not result.errors:
        return
    table = Table(
        Column("file:line", overflow="fold"),
        "field",
        "message",
        title=f"bad: {_lines(len(result.errors))}",
        title_justify="left",
    )
    for error in result.errors[:MAX_ERRORS_SHOWN]:
        table.add_row(
            escape(f"{error.file}:{error.line}"), error.field or "-", escape(error.message)
        )
    console.print(table)
    if len(result.errors) > MAX_ERRORS_SHOWN:
        console.print(f"... and {len(result.errors) - MAX_ERRORS_SHOWN} more")


def _lines(count: int) -> str:
    return f"{count} line" if count == 1 else f"{count} lines"

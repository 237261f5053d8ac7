"""WebGym task files in, ``task`` records (``schemas/avro/task/v2.avsc``) out, and back.

Guarantees: every record :func:`load_tasks` returns encodes with the task schema; ``event_id`` is
``task:<task_id>`` and ``ts`` is the constant :data:`TASK_TS`, never the load time, so loading a
file twice gives identical records (and re-publishing it changes nothing). A bad line costs that
line only: it becomes a :class:`LineError` (file, 1-based line or row number, field, message)
and the rest still loads, unless ``strict=True``, where any bad line means no tasks at all.
:func:`to_webgym` writes a record back in the WebGym shape; loading that line gives the record.
Files accepted: :func:`_rows`; fields accepted: :func:`task_from_webgym`.
"""

from __future__ import annotations

import gc
import gzip
import json
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from schemas.difficulty import DIFFICULTIES
from schemas.event_ids import task_event_id

TASK_TS = 0  # deterministic: a record's bytes depend on the task only
SOURCE = "webgym"

_SCHEMA_FIELDS = (
    "task_id",
    "task_name",
    "website",
    "start_url",
    "domain",
    "subdomain",
    "difficulty",
    "evaluator_reference",
    "definite_answer",
    "split",
    "parent_task_id",
)
_SPLIT_MARKERS = ("split", "distribution", "is_ood")
_NOT_EXTRA = frozenset(
    _SCHEMA_FIELDS + _SPLIT_MARKERS + ("extra_json", "event_id", "ts", "task_set")
)
_GROUP_FIELDS = frozenset({"id", "description", "facts"})
_SPLIT_WORDS = {
    **dict.fromkeys(("train", "training", "id", "iid", "in_distribution"), "train"),
    **dict.fromkeys(
        ("test", "testing", "eval", "evaluation", "ood", "out_of_distribution"), "test"
    ),
}
_TRUE_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
_PROGRESS_EVERY = 2000  # rows between progress reports

Progress = Callable[[float], None]  # share of the file read so far, 0.0 to 1.0


class TaskFileError(ValueError):
    """The file as a whole cannot be read (missing, unknown format, not gzip / Parquet)."""


class TaskFieldError(ValueError):
    """One field of one task is invalid; ``field`` is None when the line itself is unreadable."""

    def __init__(self, field: str | None, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class LineError:
    """A line (JSON Lines) or row (Parquet) that did not become a task."""

    file: str
    line: int  # 1-based line number, or row number for Parquet
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        if self.field is None:
            return f"{where}: {self.message}"
        return f"{where}: field {self.field!r}: {self.message}"


@dataclass
class LoadResult:
    tasks: list[dict[str, Any]]
    errors: list[LineError]
    rows: int = 0  # non-blank lines (rows) read, good and bad
    strict: bool = False

    @property
    def skipped(self) -> int:
        """Rows that did not become a task: the bad ones, or all of them in strict mode."""
        return self.rows - len(self.tasks)


@dataclass
class _Unreadable:
    message: str


def load_tasks(
    path: Path | str,
    strict: bool = False,
    progress: Progress | None = None,
    rubric_optional: bool = False,
) -> LoadResult:
    """Read and validate a task file; see :func:`_rows` and :func:`task_from_webgym` for what
    is accepted.

    ``rubric_optional``: a task without a rubric loads with no fact groups (the input of rubric
    generation); otherwise a missing rubric is an error.
    """
    path = Path(path)
    with gc_paused():
        return _load(path, strict, progress, rubric_optional)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many task records.

    They hold no reference cycles, and with 100,000 of them alive the collector otherwise spends
    about as long scanning them as the load takes (bench/task_load.py). Reference counting still
    frees everything; the previous state is restored on exit.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _load(
    path: Path, strict: bool, progress: Progress | None, rubric_optional: bool = False
) -> LoadResult:
    name = str(path)
    result = LoadResult([], [], strict=strict)
    first_line: dict[str, int] = {}
    for number, raw in _rows(path, progress):
        result.rows += 1
        try:
            if isinstance(raw, _Unreadable):
                raise TaskFieldError(None, raw.message)
            task = task_from_webgym(raw, rubric_optional)
            earlier = first_line.get(task["task_id"])
            if earlier is not None:
                raise TaskFieldError(
                    "task_id", f"{task['task_id']!r} repeats the task of line {earlier}"
                )
        except TaskFieldError as error:
            result.errors.append(LineError(name, number, error.field, error.message))
            continue
        first_line[task["task_id"]] = number
        result.tasks.append(task)
    if strict and result.errors:
        result.tasks = []
    return result


def task_from_webgym(raw: Mapping[str, Any], rubric_optional: bool = False) -> dict[str, Any]:
    """One task record from one WebGym line; raises :class:`TaskFieldError` naming the field.

    Fields, as in the published data set:

    - ``task_id`` (text, or an integer): unique within a file; a repeat is an error on the later
      line.
    - ``task_name``: the instruction. ``website``: a host (``amazon.com``), or a URL with its
      scheme.
    - ``start_url``: optional; default ``https://<website>/`` (or ``website`` itself if it has a
      scheme). Only ``http`` and ``https`` URLs are accepted.
    - ``domain``, ``subdomain``, ``definite_answer`` (numbers become text), ``parent_task_id``:
      optional; missing, null or blank is None.
    - ``difficulty``: :func:`normalise_difficulty`.
    - ``evaluator_reference``, the rubric: :func:`normalise_evaluator_reference`.
    - The split marker: :func:`normalise_split`.
    - ``task_set``: optional, the named set the task belongs to (``tasks.sets``); ``webgym tasks
      load`` gives tasks without one the set of the file (``--task-set``, default the file's
      name).
    - Every other field is kept in ``extra_json`` (:func:`_extras`).
    """
    if not isinstance(raw, Mapping):
        raise TaskFieldError(None, f"a line must be one JSON object, got {_kind(raw)}")
    task_id = _task_id(raw.get("task_id"))
    task_name = _required_text(raw, "task_name")
    website = _required_text(raw, "website")
    if website.split() != [website]:
        raise TaskFieldError("website", f"{website!r} contains spaces; give a host or a URL")
    start_url = _start_url(raw.get("start_url"), website)
    difficulty = normalise_difficulty(raw.get("difficulty"))
    rubric = raw.get("evaluator_reference")
    if rubric_optional and (rubric is None or rubric == [] or rubric == ""):
        groups, group_extras = [], {}
    else:
        groups, group_extras = normalise_evaluator_reference(rubric)
    split = normalise_split(raw)
    extras = _extras(raw)
    if group_extras:
        extras["evaluator_reference_extra"] = group_extras
    if extras.get("source") is None:
        extras["source"] = SOURCE
    task_set = raw.get("task_set")
    if task_set is not None and not isinstance(task_set, str):
        raise TaskFieldError("task_set", f"is {_kind(task_set)}; expected a set name")
    return {
        "event_id": task_event_id(task_id),
        "ts": TASK_TS,
        "task_id": task_id,
        "task_name": task_name,
        "website": website,
        "start_url": start_url,
        "domain": _optional_text(raw, "domain"),
        "subdomain": _optional_text(raw, "subdomain"),
        "difficulty": difficulty,
        "evaluator_reference": groups,
        "definite_answer": _optional_text(raw, "definite_answer", numbers=True),
        "split": split,
        "parent_task_id": _optional_text(raw, "parent_task_id"),
        "extra_json": json.dumps(extras, sort_keys=True, ensure_ascii=False, default=str),
        # The line's own set, if any; `webgym tasks load` gives the others the file's set.
        "task_set": task_set or "",
    }


def normalise_difficulty(value: Any) -> str:
    """``easy`` / ``medium`` / ``hard`` in any case, or 1 / 2 / 3 (a number or a numeric
    string). Anything else is an error."""
    if value is None:
        raise TaskFieldError("difficulty", "missing; give easy, medium, hard or 1-3")
    number: float | None = None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in DIFFICULTIES:
            return text
        try:
            number = float(text)
        except ValueError:
            number = None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = value
    if number is not None and number in (1, 2, 3):
        return DIFFICULTIES[int(number) - 1]
    raise TaskFieldError("difficulty", f"{value!r} is not easy, medium, hard or 1-3")


def normalise_evaluator_reference(
    value: Any,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Fact groups, and the extra keys of each group by group id (empty if there are none).

    The rubric becomes fact groups ``{id, description, facts}``: a list of fact groups is taken
    as it is (a group without ``id`` is numbered ``g1, g2, ...`` by its position); the older
    shapes become one group each: one string (a group with that description and that one fact),
    a list of strings (one group per string), a list of ``{description, difficulty}`` (fact =
    description). Keys of a group other than id, description and facts (the old per-group
    ``difficulty``) are kept in ``extra_json["evaluator_reference_extra"][<id>]``.
    """
    name = "evaluator_reference"
    if value is None:
        raise TaskFieldError(name, "missing; give the rubric as fact groups or fact strings")
    items = [value] if isinstance(value, str | Mapping) else value
    if not isinstance(items, list | tuple):
        raise TaskFieldError(
            name, f"is {_kind(value)}; give a list of fact groups, a string or a list of strings"
        )
    if not items:
        raise TaskFieldError(name, "is empty: a task needs at least one fact group to be judged")
    groups: list[dict[str, Any]] = []
    group_extras: dict[str, dict[str, Any]] = {}
    for position, item in enumerate(items, 1):
        where = f"item {position}"
        if isinstance(item, str):
            if not item.strip():
                raise TaskFieldError(name, f"{where} is an empty string")
            groups.append({"id": f"g{position}", "description": item, "facts": [item]})
            continue
        if not isinstance(item, Mapping):
            raise TaskFieldError(name, f"{where} is {_kind(item)}; expected a fact group or text")
        group_id = item.get("id")
        if group_id is None or group_id == "":
            group_id = f"g{position}"
        elif isinstance(group_id, int) and not isinstance(group_id, bool):
            group_id = str(group_id)
        elif not isinstance(group_id, str):
            raise TaskFieldError(name, f"{where}: id {group_id!r} is not text")
        description = item.get("description")
        if not isinstance(description, str) or not description.strip():
            raise TaskFieldError(name, f"{where}: description is missing or not text")
        facts = item.get("facts")
        if facts is None:
            facts = [description]  # the {description, difficulty} shape: description = fact
        elif not isinstance(facts, list | tuple) or not facts:
            raise TaskFieldError(name, f"{where}: facts must be a non-empty list of strings")
        elif not all(isinstance(fact, str) and fact.strip() for fact in facts):
            raise TaskFieldError(name, f"{where}: every fact must be a non-empty string")
        if any(group["id"] == group_id for group in groups):
            raise TaskFieldError(name, f"{where}: fact group id {group_id!r} is used twice")
        groups.append({"id": group_id, "description": description, "facts": list(facts)})
        rest = {k: v for k, v in item.items() if k not in _GROUP_FIELDS and v is not None}
        if rest:
            group_extras[group_id] = rest
    return groups, group_extras


def normalise_split(raw: Mapping[str, Any]) -> str | None:
    """``train``, ``test`` or None from the split / distribution / is_ood markers of a line.

    Accepted: ``split`` or ``distribution`` with train / training / id / iid / in_distribution
    (-> train) or test / testing / eval / evaluation / ood / out_of_distribution (-> test), any
    case, ``-`` or space for ``_``; or ``is_ood`` as a boolean, 0 / 1 or true / false / yes /
    no. Markers that disagree are an error.
    """
    found: dict[str, str] = {}
    for marker in ("split", "distribution"):
        value = raw.get(marker)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        word = ""
        if isinstance(value, str):
            word = value.strip().lower().replace("-", "_").replace(" ", "_")
        if word not in _SPLIT_WORDS:
            raise TaskFieldError(
                marker, f"{value!r} is not a split; use train or test (or in/out_of_distribution)"
            )
        found[marker] = _SPLIT_WORDS[word]
    is_ood = raw.get("is_ood")
    if is_ood is not None:
        flag = _flag(is_ood)
        if flag is None:
            raise TaskFieldError("is_ood", f"{is_ood!r} is not true or false")
        found["is_ood"] = "test" if flag else "train"
    if len(set(found.values())) > 1:
        said = ", ".join(f"{marker} says {split}" for marker, split in found.items())
        raise TaskFieldError(next(iter(found)), f"split markers disagree ({said}); keep one")
    return next(iter(found.values()), None)


def extra_of(task: Mapping[str, Any]) -> dict[str, Any]:
    """A task record's ``extra_json`` as a dict (empty when the record has none); a
    :class:`ValueError` that says why when it is not JSON or not a JSON object."""
    try:
        extra = json.loads(task.get("extra_json") or "{}")
    except ValueError as exc:
        raise ValueError(f"extra_json is not JSON: {exc}") from None
    if not isinstance(extra, dict):
        raise ValueError(f"extra_json is a JSON {type(extra).__name__}, not an object")
    return extra


def to_webgym(task: Mapping[str, Any]) -> dict[str, Any]:
    """A task record as one line of a WebGym file (extras back at the top level)."""
    extras = json.loads(task.get("extra_json") or "{}")
    group_extras = extras.pop("evaluator_reference_extra", None)
    if not isinstance(group_extras, dict):
        group_extras = {}
    line: dict[str, Any] = {
        "task_id": task["task_id"],
        "task_name": task["task_name"],
        "website": task["website"],
        "start_url": task["start_url"],
        "domain": task.get("domain"),
        "subdomain": task.get("subdomain"),
        "difficulty": task["difficulty"],
        "evaluator_reference": [
            {
                "id": group["id"],
                "description": group["description"],
                "facts": list(group["facts"]),
                **group_extras.get(group["id"], {}),
            }
            for group in task["evaluator_reference"]
        ],
        "definite_answer": task.get("definite_answer"),
        "split": task.get("split"),
    }
    if task.get("parent_task_id") is not None:
        line["parent_task_id"] = task["parent_task_id"]
    if task.get("task_set"):
        line["task_set"] = task["task_set"]
    for key, value in extras.items():
        line.setdefault(key, value)
    return line


def write_webgym_jsonl(path: Path | str, tasks: list[Mapping[str, Any]]) -> None:
    """Write tasks as WebGym JSON Lines (gzipped if the name ends in ``.gz``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as out:
        for task in tasks:
            out.write(json.dumps(to_webgym(task), ensure_ascii=False) + "\n")


def _rows(path: Path, progress: Progress | None) -> Iterator[tuple[int, Any]]:
    """The rows of a task file: JSON Lines (``.jsonl``, or gzipped ``.jsonl.gz``), one JSON
    object a line (blank lines are skipped), or Parquet (``.parquet``), one task a row."""
    if not path.is_file():
        raise TaskFileError(f"{path}: no such file; give the path of a .jsonl or .parquet file")
    name = path.name.lower()
    if name.endswith(".parquet"):
        yield from _parquet_rows(path, progress)
    elif name.endswith((".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")):
        yield from _jsonl_rows(path, progress)
    else:
        raise TaskFileError(
            f"{path}: unknown task file format; expected .jsonl, .jsonl.gz or .parquet"
        )


def _jsonl_rows(path: Path, progress: Progress | None) -> Iterator[tuple[int, Any]]:
    size = max(path.stat().st_size, 1)
    with path.open("rb") as raw:
        stream = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw
        try:
            for number, line in enumerate(stream, 1):
                if progress is not None and number % _PROGRESS_EVERY == 0:
                    progress(raw.tell() / size)
                if not line.strip():
                    continue
                try:
                    yield number, json.loads(line)
                except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
                    yield number, _Unreadable(f"not valid JSON: {exc}")
        except (gzip.BadGzipFile, EOFError, OSError) as exc:
            raise TaskFileError(
                f"{path}: cannot be read ({exc}); is it a {path.suffix} file?"
            ) from exc
    if progress is not None:
        progress(1.0)


def _parquet_rows(path: Path, progress: Progress | None) -> Iterator[tuple[int, Any]]:
    from pyarrow import ArrowException, parquet  # only for Parquet files: a heavy import

    try:
        table = parquet.ParquetFile(path)
    except (ArrowException, OSError) as exc:
        raise TaskFileError(f"{path}: not a readable Parquet file ({exc})") from exc
    total = max(table.metadata.num_rows, 1)
    number = 0
    for batch in table.iter_batches(batch_size=4096):
        for row in batch.to_pylist():
            number += 1
            yield number, row
        if progress is not None:
            progress(number / total)
    if progress is not None:
        progress(1.0)


def _task_id(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise TaskFieldError("task_id", "missing or not text; every task needs a unique task_id")
    return value


def _required_text(raw: Mapping[str, Any], name: str) -> str:
    value = raw.get(name)
    if value is None:
        raise TaskFieldError(name, "missing")
    if not isinstance(value, str):
        raise TaskFieldError(name, f"is {_kind(value)}, not text")
    if not value.strip():
        raise TaskFieldError(name, "is empty")
    return value


def _optional_text(raw: Mapping[str, Any], name: str, numbers: bool = False) -> str | None:
    value = raw.get(name)
    if value is None:
        return None
    if numbers and isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise TaskFieldError(name, f"{value!r} is not a usable answer")
        return str(value)
    if not isinstance(value, str):
        raise TaskFieldError(name, f"is {_kind(value)}, not text")
    return value if value.strip() else None


def _start_url(value: Any, website: str) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        return _default_start_url(website)
    if not isinstance(value, str):
        raise TaskFieldError("start_url", f"is {_kind(value)}, not a URL")
    return _checked_url(value, "start_url")


@lru_cache(maxsize=65536)  # websites repeat across a task set; errors are not cached
def _default_start_url(website: str) -> str:
    if "://" in website:
        url = website if urlsplit(website).path else website + "/"
    else:
        url = f"https://{website.rstrip('/')}/"
    return _checked_url(url, "website")


@lru_cache(maxsize=65536)
def _checked_url(url: str, field_name: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TaskFieldError(
            field_name, f"{url!r} is not an http(s) URL (agents open only http and https)"
        )
    return url


def _extras(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Every field the schema has no place for, for ``extra_json`` (a JSON object, keys sorted),
    with ``"source": "webgym"`` unless the line has a ``source`` of its own. Null values are
    dropped (a Parquet column gives every row every field). An ``extra_json`` field (records
    dumped from the topic) is merged in; ``event_id`` and ``ts`` are ignored, as both are
    derived here."""
    embedded = raw.get("extra_json")
    extras: dict[str, Any] = {}
    if isinstance(embedded, str) and embedded.strip():
        try:
            embedded = json.loads(embedded)
        except ValueError as exc:
            raise TaskFieldError("extra_json", f"not valid JSON: {exc}") from None
    if isinstance(embedded, Mapping):
        extras.update({k: v for k, v in embedded.items() if k not in _NOT_EXTRA and v is not None})
    elif embedded not in (None, ""):
        raise TaskFieldError("extra_json", f"is {_kind(embedded)}; expected a JSON object")
    extras.update({k: v for k, v in raw.items() if k not in _NOT_EXTRA and v is not None})
    return extras


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        return _TRUE_WORDS.get(value.strip().lower())
    return None


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "text",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)

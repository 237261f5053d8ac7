"""A replay as one self-contained HTML page: no scripts, no external resources.

Pure (no I/O): :func:`render_html` turns a :class:`analytics.replay.Replay` into a page whose
screenshots are inline ``data:`` URLs with the action drawn over them as SVG (shapes from
:mod:`analytics.replay_draw`). Every text that came from the log (the model's thought, memory and
raw reply, page titles, URLs, verdicts) is HTML-escaped, so a reply containing markup shows as
text and never runs. Each step's ``<section>`` carries ``data-step``; its screenshot carries
``data-observation`` (the observation's event id) and its action ``data-action`` (the action sent
to the browser, else the parsed one, as JSON), so tools and tests can read the page back.
"""

from __future__ import annotations

import base64
import datetime
import json
from html import escape
from typing import Any

from analytics.replay import Frame, Replay, ReplayStep
from analytics.replay_draw import ClickMarker, Overlay, ScrollArrow, TextLabel, describe, overlay

STYLE = """
:root { --fg:#1d1d1f; --muted:#6e6e73; --line:#d2d2d7; --bg:#f5f5f7; --card:#fff;
  --good:#1a7f37; --bad:#c0362c; --mid:#9a6700; --mark:#ff2d55; --arrow:#0a84ff; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif; color:var(--fg);
  background:var(--bg); }
header, main, footer { max-width:1400px; margin:0 auto; padding:16px 24px; }
h1 { font-size:22px; margin:8px 0; } h1 code { font-size:20px; }
h2 { font-size:17px; margin:0 0 10px; display:flex; gap:12px; align-items:baseline; }
h3 { font-size:13px; text-transform:uppercase; letter-spacing:.04em; color:var(--muted);
  margin:14px 0 4px; }
code, pre { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:13px; }
pre { white-space:pre-wrap; word-break:break-word; background:var(--bg); padding:8px;
  border-radius:6px; margin:4px 0; }
.instruction { font-size:17px; background:var(--card); border-left:4px solid var(--arrow);
  padding:10px 14px; border-radius:6px; }
.facts { display:flex; flex-wrap:wrap; gap:6px 18px; margin:10px 0; padding:0; }
.facts div { display:flex; gap:6px; } .facts dt { color:var(--muted); } .facts dd { margin:0; }
.card { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:16px;
  margin:14px 0; }
.reward { font-weight:700; padding:2px 10px; border-radius:12px; color:#fff; }
.reward.good { background:var(--good); } .reward.bad { background:var(--bad); }
.reward.mid { background:var(--mid); } .reward.none { background:var(--muted); }
table { border-collapse:collapse; width:100%; }
td, th { text-align:left; padding:4px 8px; border-bottom:1px solid var(--line);
  vertical-align:top; }
th { color:var(--muted); font-weight:600; font-size:13px; }
.yes { color:var(--good); font-weight:700; } .no { color:var(--bad); font-weight:700; }
nav { display:flex; flex-wrap:wrap; gap:6px; margin-top:10px; }
nav a { text-decoration:none; background:var(--card); border:1px solid var(--line);
  border-radius:6px; padding:2px 8px; color:var(--fg); font-size:13px; }
.row { display:grid; grid-template-columns:minmax(0,3fr) minmax(0,2fr); gap:18px; }
@media (max-width: 1000px) { .row { grid-template-columns:1fr; } }
figure { margin:0; }
.shot { position:relative; width:100%; border:1px solid var(--line); border-radius:6px;
  overflow:hidden; background:#000; }
.shot img, .shot svg { position:absolute; inset:0; width:100%; height:100%; display:block; }
figcaption { font-size:13px; color:var(--muted); margin-top:6px; word-break:break-all; }
.thought, .memory { white-space:pre-wrap; word-break:break-word; margin:0; }
.action { font-size:16px; font-weight:600; word-break:break-word; }
.note { font-size:13px; border-radius:6px; padding:4px 8px; margin:6px 0; }
.note.error { background:#fde8e7; color:var(--bad); }
.note.info { background:var(--bg); color:var(--muted); }
.missing { padding:40px; text-align:center; color:#fff; }
.step-no { color:var(--muted); font-weight:400; }
footer { color:var(--muted); font-size:13px; }
"""


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _time(ts: int | None) -> str:
    if ts is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ts / 1000, tz=datetime.UTC).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z")


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.1f} ms" if value < 10 else f"{value:.0f} ms"


def data_url(frame: Frame) -> str:
    kind = "png" if frame.screenshot_format == "png" else "jpeg"
    return f"data:image/{kind};base64,{base64.b64encode(frame.screenshot).decode('ascii')}"


def _svg(drawn: Overlay, frame: Frame) -> str:
    """The shapes of ``drawn`` as an SVG layer in ``frame``'s pixels."""
    stroke = max(frame.width / 400, 2.0)
    parts = []
    for shape in drawn.shapes:
        if isinstance(shape, ClickMarker):
            x, y, r = shape.x, shape.y, shape.radius
            rings = [r, r * 1.6] if shape.double else [r]
            for ring in rings:
                parts.append(
                    f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{ring:.1f}" fill="rgba(255,45,85,.18)" '
                    f'stroke="#ff2d55" stroke-width="{stroke:.1f}"/>'
                )
            for x1, y1, x2, y2 in (
                (x - 2 * r, y, x - r / 3, y),
                (x + r / 3, y, x + 2 * r, y),
                (x, y - 2 * r, x, y - r / 3),
                (x, y + r / 3, x, y + 2 * r),
            ):
                parts.append(
                    f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                    f'stroke="#ff2d55" stroke-width="{stroke:.1f}"/>'
                )
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{stroke:.1f}" fill="#ff2d55"/>')
        elif isinstance(shape, TextLabel):
            parts.append(
                f'<rect x="{shape.x:.1f}" y="{shape.y:.1f}" width="{shape.width:.1f}" '
                f'height="{shape.height:.1f}" rx="6" fill="rgba(17,17,17,.85)" '
                f'stroke="#ff2d55" stroke-width="{stroke / 2:.1f}"/>'
                f'<text x="{shape.x + 8:.1f}" y="{shape.y + shape.height - 10:.1f}" '
                f'font-family="ui-monospace,monospace" font-size="22" fill="#fff">'
                f"{_e(shape.text)}</text>"
            )
        elif isinstance(shape, ScrollArrow):
            points = " ".join(f"{px:.1f},{py:.1f}" for px, py in shape.head)
            parts.append(
                f'<line x1="{shape.x1:.1f}" y1="{shape.y1:.1f}" x2="{shape.x2:.1f}" '
                f'y2="{shape.y2:.1f}" stroke="#0a84ff" stroke-width="{stroke * 1.5:.1f}" '
                f'stroke-linecap="round"/><polygon points="{points}" fill="#0a84ff"/>'
                f'<circle cx="{shape.x1:.1f}" cy="{shape.y1:.1f}" r="{stroke * 2:.1f}" '
                f'fill="#0a84ff"/>'
            )
    return (
        f'<svg viewBox="0 0 {frame.width} {frame.height}" preserveAspectRatio="none" '
        f'aria-hidden="true">{"".join(parts)}</svg>'
    )


def _figure(frame: Frame | None, missing: str | None, drawn: Overlay | None) -> str:
    if frame is None:
        return (
            f'<figure><div class="shot missing">screenshot unavailable: {_e(missing)}</div>'
            "</figure>"
        )
    if frame.failure or not frame.screenshot:
        reason = frame.failure or "the observation has no screenshot"
        return (
            f'<figure><div class="shot missing" data-observation="{_e(frame.event_id)}">'
            f"browser failure: {_e(reason)}</div>"
            f"<figcaption>{_e(frame.url)}</figcaption></figure>"
        )
    svg = _svg(drawn, frame) if drawn is not None else ""
    ratio = f"{frame.width} / {frame.height}" if frame.width and frame.height else "16 / 10"
    return (
        f'<figure><div class="shot" style="aspect-ratio: {ratio}">'
        f'<img class="screenshot" alt="screenshot of observation {_e(frame.step)}" '
        f'data-observation="{_e(frame.event_id)}" data-sha256="{frame.sha256}" '
        f'src="{data_url(frame)}">{svg}</div>'
        f"<figcaption><b>{_e(frame.title) or '(no title)'}</b> &middot; "
        f"<code>{_e(frame.url)}</code></figcaption></figure>"
    )


def _timings(step: ReplayStep) -> str:
    rows = []
    if step.policy_version is not None:
        rows.append(("policy version", f"v{step.policy_version}"))
    if step.latency_ms is not None:
        rows.append(("inference latency", _ms(step.latency_ms)))
    if step.backend:
        rows.append(("policy backend", f"{step.backend} ({step.model})"))
    if step.inference_ts is not None:
        rows.append(("reply at", _time(step.inference_ts)))
    frame = step.frame
    if frame is not None and frame.timings_ms:
        source = "first navigation" if frame.step == 0 else f"action of step {frame.step}"
        for name, value in frame.timings_ms.items():
            rows.append((f"page: {name}", _ms(value)))
        rows.append(("page from", source))
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f'<table class="timings">{body}</table>'


def _step_section(step: ReplayStep) -> str:
    shown = step.sent_action if step.sent_action is not None else step.action
    if step.frame is not None:
        drawn = overlay(shown, step.frame.width, step.frame.height, step.frame.marks)
    else:
        drawn = Overlay((), describe(shown))
    figure = _figure(step.frame, step.frame_missing, drawn)
    caption, problem = drawn.caption, drawn.problem
    notes = []
    if step.frame is not None and step.frame.action_error:
        notes.append(("error", f"the previous action failed: {step.frame.action_error}"))
    if step.parse_error:
        notes.append(("error", f"the reply did not parse: {step.parse_error}"))
    if step.backend_error:
        notes.append(("error", f"the policy backend gave no reply: {step.backend_error}"))
    if problem:
        notes.append(("error", f"cannot draw the action: {problem}"))
    if step.action is not None and step.sent_action is None:
        why = "it ends the episode" if step.action.get("kind") == "answer" else "the episode ended"
        notes.append(("info", f"not sent to the browser: {why}"))
    if step.repeated:
        notes.append(("info", "filtered as a repetition (not trained on)"))
    if step.inference_missing:
        notes.append(("error", f"the reply is unavailable: {step.inference_missing}"))
    notes_html = "".join(f'<div class="note {kind}">{_e(text)}</div>' for kind, text in notes)
    action_json = json.dumps(shown, sort_keys=True, ensure_ascii=False) if shown else ""
    text_blocks = []
    for title, value in (("Thought", step.thought), ("Memory", step.memory)):
        if value:
            text_blocks.append(f'<h3>{title}</h3><p class="{title.lower()}">{_e(value)}</p>')
    raw = (
        f"<details><summary>raw reply</summary><pre>{_e(step.raw_text)}</pre></details>"
        if step.raw_text
        else ""
    )
    return (
        f'<section class="card step" id="step-{step.step}" data-step="{step.step}">'
        f'<h2><span class="step-no">Step {step.step}</span>'
        f'<span class="action" data-action="{_e(action_json)}" '
        f'data-sent="{"true" if step.sent_action is not None else "false"}">'
        f"{_e(caption)}</span></h2>"
        f'<div class="row">{figure}<div class="detail">{notes_html}'
        f"{''.join(text_blocks)}<h3>Timings</h3>{_timings(step)}{raw}</div></div></section>"
    )


def _reward_badge(replay: Replay) -> str:
    if replay.reward is None:
        label = {"running": "running", "ended": "not judged yet"}.get(replay.state, "no reward")
        return f'<span class="reward none">{_e(label)}</span>'
    kind = "good" if replay.reward >= 1 else "bad" if replay.reward <= 0 else "mid"
    return (
        f'<span class="reward {kind}" data-reward="{replay.reward}">reward {replay.reward:g}</span>'
    )


def _outcome(replay: Replay) -> str:
    parts = [f"<h2>Outcome {_reward_badge(replay)}</h2>"]
    end = "still running" if replay.end_kind is None else f"{replay.end_kind}: {replay.reason}"
    parts.append(f"<p><b>Ended</b>: {_e(end)}</p>")
    if replay.final_answer is not None:
        parts.append(
            f'<p><b>Final answer</b>: <span class="final-answer">{_e(replay.final_answer)}'
            "</span></p>"
        )
    if replay.judge_name:
        parts.append(
            f"<p><b>Judge</b>: {_e(replay.judge_name)} {_e(replay.judge_version)}"
            + (
                f' &middot; <span class="no">error: {_e(replay.judge_error)}</span>'
                if replay.judge_error
                else ""
            )
            + "</p>"
        )
    if replay.blocked:
        parts.append(f'<div class="note error">site blocked: {_e(replay.block_reason)}</div>')
    if replay.verdicts:
        rows = "".join(
            f'<tr class="verdict" data-fact-group="{_e(v.get("fact_group_id"))}">'
            f"<td>{_e(v.get('fact_group_id'))}</td><td>{_e(v.get('fact'))}</td>"
            f'<td class="{"yes" if v.get("satisfied") else "no"}">'
            f"{'satisfied' if v.get('satisfied') else 'not satisfied'}</td>"
            f"<td>{_e(v.get('rationale'))}</td></tr>"
            for v in replay.verdicts
        )
        parts.append(
            "<table><tr><th>fact group</th><th>fact</th><th>verdict</th><th>rationale</th></tr>"
            f"{rows}</table>"
        )
    return f'<section class="card outcome">{"".join(parts)}</section>'


def render_html(replay: Replay) -> str:
    """The page; see the module docstring for what it guarantees."""
    duration = (
        _ms(replay.ended_ts - replay.started_ts)
        if replay.ended_ts is not None and replay.started_ts is not None
        else "-"
    )
    facts = [
        ("site", replay.website),
        ("task", replay.task_id),
        ("difficulty", replay.difficulty),
        ("state", replay.state),
        ("steps", f"{len(replay.steps)}" + (f" of {replay.horizon}" if replay.horizon else "")),
        ("policy versions", ", ".join(f"v{v}" for v in replay.policy_versions) or "-"),
        ("started", _time(replay.started_ts)),
        ("took", duration),
    ]
    facts_html = "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in facts)
    start = (
        f"<p>Start: <code>{_e(replay.start_url)}</code>"
        + (f" (set-up {_e(replay.setup)})" if replay.setup else "")
        + "</p>"
    )
    links = "".join(f'<a href="#step-{s.step}">{s.step}</a>' for s in replay.steps)
    if replay.final_frame is not None:
        links += '<a href="#final">final page</a>'
    steps_html = "".join(_step_section(step) for step in replay.steps)
    if not replay.steps:
        steps_html = '<section class="card"><p>No step in the log yet.</p></section>'
    final_html = ""
    if replay.final_frame is not None:
        frame = replay.final_frame
        final_html = (
            f'<section class="card final" id="final"><h2>After the last step</h2>'
            f'<div class="row">{_figure(frame, None, None)}<div class="detail">'
            + (
                f'<div class="note error">{_e(frame.action_error)}</div>'
                if frame.action_error
                else ""
            )
            + "</div></div></section>"
        )
    running = (
        '<div class="note info">This episode is still running: reload for newer steps.</div>'
        if replay.state == "running"
        else ""
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>replay {_e(replay.episode_id)}</title><style>{STYLE}</style></head><body>"
        f"<header><h1>Episode <code>{_e(replay.episode_id)}</code></h1>"
        f'<p class="instruction">{_e(replay.instruction) or "(instruction unknown)"}</p>'
        f'<dl class="facts">{facts_html}</dl>{start}{running}{_outcome(replay)}'
        f"<nav>{links}</nav></header>"
        f"<main>{steps_html}{final_html}</main>"
        f"<footer>Rebuilt from the log ({_e(replay.source)}) by <code>webgym replay</code>."
        "</footer></body></html>\n"
    )

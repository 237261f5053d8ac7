"""Forms and multi-step flows: the contact form of every site and the item flow of each domain
(book, apply, request a viewing...): form → review → confirmation.

Post/redirect/get: a valid POST answers 303 to a GET page whose URL carries the cleaned values,
and every GET page validates them again. So the review and confirmation pages are plain URLs
(the reference shown is the same on every visit, and a task can name the confirmation page as
required), no server state is kept, and an invalid or tampered URL shows the form with its
errors instead of a confirmation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sites.catalogues import Item, money
from sites.data import Site
from sites.domains import EMAIL, NAME
from sites.forms import FieldSpec, FlowSpec, reference, validate
from sites.layout import esc, href, url


@dataclass(frozen=True)
class Outcome:
    """What a flow step answers: a page (title, main, status) or a 303 redirect."""

    title: str = ""
    main: str = ""
    status: int = 200
    location: str | None = None
    set_cookies: tuple[str, ...] = field(default=())


def redirect(location: str, *set_cookies: str) -> Outcome:
    return Outcome(location=location, status=303, set_cookies=set_cookies)


def _control(spec: FieldSpec, value: str, invalid: bool) -> str:
    attrs = f'id="f-{spec.name}" name="{spec.name}"'
    if invalid:
        attrs += f' aria-invalid="true" aria-describedby="e-{spec.name}"'
    if spec.kind == "textarea":
        return f'<textarea {attrs} rows="4">{esc(value)}</textarea>'
    if spec.kind == "select":
        options = "".join(
            f"<option{' selected' if option == value else ''}>{esc(option)}</option>"
            for option in spec.options
        )
        return f'<select {attrs}><option value="">Choose…</option>{options}</select>'
    # Plain text inputs (with novalidate on the form): the server, not the browser, validates.
    mode = {"int": ' inputmode="numeric"', "email": ' inputmode="email"'}.get(spec.kind, "")
    placeholder = f' placeholder="{esc(spec.hint)}"' if spec.hint else ""
    return f'<input type="text" {attrs}{mode}{placeholder} value="{esc(value)}">'


def form_html(
    fields: tuple[FieldSpec, ...],
    values: Mapping[str, str],
    errors: Mapping[str, str],
    action: str,
    submit: str,
) -> str:
    """A POST form with GOV.UK-style errors: a summary on top and a message at each field."""
    summary = ""
    if errors:
        items = "".join(
            f'<li><a href="#f-{name}">{esc(message)}</a></li>' for name, message in errors.items()
        )
        summary = (
            '<div class="error-summary" role="alert"><h2>There is a problem</h2>'
            f"<p>{len(errors)} {'field needs' if len(errors) == 1 else 'fields need'} your "
            f"attention.</p><ul>{items}</ul></div>"
        )
    blocks = []
    for spec in fields:
        error = errors.get(spec.name)
        label = esc(spec.label) + (
            "" if spec.required else ' <span class="muted">(optional)</span>'
        )
        hint = ""
        if spec.kind == "int" and spec.low is not None:
            hint = f"A number from {spec.low} to {spec.high}."
        elif spec.kind == "date":
            hint = f"Write the date as YYYY-MM-DD, from {spec.low} to {spec.high}."
        blocks.append(
            f'<div class="field{" invalid" if error else ""}"><label for="f-{spec.name}">{label}'
            f"</label>{f'<div class=hint>{hint}</div>' if hint else ''}"
            f"{f'<p class=error id=e-{spec.name}>{esc(error)}</p>' if error else ''}"
            f"{_control(spec, values.get(spec.name, ''), bool(error))}</div>"
        )
    return (
        f'{summary}<form class="panel" method="post" action="{esc(action)}" novalidate>'
        f'{"".join(blocks)}<button type="submit">{esc(submit)}</button></form>'
    )


def summary_table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{esc(label)}</th><td>{esc(text)}</td></tr>" for label, text in rows)
    return f'<table class="facts">{body}</table>'


# The contact form of every site.


def contact_fields(site: Site) -> tuple[FieldSpec, ...]:
    return (
        NAME,
        EMAIL,
        FieldSpec("topic", "Topic", "select", options=site.spec.contact_topics),
        FieldSpec("message", "Your message", "textarea"),
    )


def contact(site: Site, data: Mapping[str, str], method: str) -> Outcome:
    fields = contact_fields(site)
    values, errors = validate(fields, data)
    if method == "POST" and not errors:
        return redirect(url("/contact/sent", **values))
    intro = (
        f"<h1>Contact {esc(site.name)}</h1>"
        "<p>Send us a message; we answer within two working days.</p>"
    )
    shown = errors if method == "POST" else {}
    form = form_html(
        fields, values if method == "POST" else data, shown, "/contact", "Send message"
    )
    return Outcome("Contact us", intro + form)


def contact_sent(site: Site, data: Mapping[str, str]) -> Outcome:
    fields = contact_fields(site)
    values, errors = validate(fields, data)
    if errors:
        return contact(site, data, "POST")
    code = reference(site.reference_prefix, site.site_id, "contact", values)
    main = (
        f'<h1>Message sent</h1><div class="notice"><p>Thank you, {esc(values["name"])}. '
        f'Your message reference is</p><p class="reference">{code}</p><p>We will reply to '
        f"{esc(values['email'])} within two working days.</p></div>"
        + summary_table([("Topic", values["topic"]), ("Message", values["message"])])
    )
    return Outcome("Message sent", main)


# The item flow of a domain: /{flow}/{slug} → /review → /confirmed.


def flow_total(flow: FlowSpec, item: Item, values: Mapping[str, str]) -> str | None:
    """The shown total of a flow submission, or None when the flow has no price."""
    if flow.multiplier is None:
        return None
    amount = item.value * int(values[flow.multiplier])
    return money(round(amount, 2), cents="." in item.value_text)


def _flow_of(site: Site) -> FlowSpec:
    """The site's item flow; only a site with one (any domain but shopping) routes here."""
    flow = site.spec.flow
    assert flow is not None, f"{site.site_id} has no item flow"
    return flow


def flow_reference(site: Site, item: Item, values: Mapping[str, str]) -> str:
    flow = _flow_of(site)
    return reference(site.reference_prefix, site.site_id, f"{flow.path}/{item.slug}", values)


def _item_box(site: Site, item: Item) -> str:
    facts = " · ".join(esc(item.field(label)) for label in site.spec.card_fields)
    return (
        f'<div class="notice"><strong><a href="{site.item_path(item)}">{esc(item.name)}</a>'
        f'</strong><br><span class="muted">{esc(item.category)} · {facts}</span><br>'
        f"{esc(site.spec.value_label)}: {esc(item.value_text)}</div>"
    )


def _answers(flow: FlowSpec, item: Item, values: Mapping[str, str]) -> list[tuple[str, str]]:
    """Summary rows of a submission: each field's answer, then the total if the flow has one."""
    rows = [(spec.label, values[spec.name] or "-") for spec in flow.fields]
    total = flow_total(flow, item, values)
    if total is not None:
        rows.append((flow.total_label, total))
    return rows


def flow_form(site: Site, item: Item, data: Mapping[str, str], method: str) -> Outcome:
    flow = _flow_of(site)
    base = f"/{flow.path}/{item.slug}"
    values, errors = validate(flow.fields, data)
    if method == "POST" and not errors:
        return redirect(url(f"{base}/review", **values))
    shown = errors if method == "POST" else {}
    main = f"<h1>{esc(flow.title)}</h1>{_item_box(site, item)}<h2>Your details</h2>" + form_html(
        flow.fields, values if method == "POST" else data, shown, base, "Continue"
    )
    return Outcome(f"{flow.title}: {item.name}", main)


def flow_submitted(site: Site, item: Item, page: str, data: Mapping[str, str]) -> Outcome:
    """A page after the form (``page``: "review" or "confirmed") for the values in its URL; the
    form with its errors instead when they do not validate (a tampered or hand-made URL)."""
    flow = _flow_of(site)
    values, errors = validate(flow.fields, data)
    if errors:
        return flow_form(site, item, data, "POST")
    render = _review if page == "review" else _confirmation
    return render(site, flow, item, values)


def _review(site: Site, flow: FlowSpec, item: Item, values: dict[str, str]) -> Outcome:
    base = f"/{flow.path}/{item.slug}"
    rows = [(site.spec.noun.capitalize(), item.name), *_answers(flow, item, values)]
    hidden = "".join(
        f'<input type="hidden" name="{name}" value="{esc(value)}">'
        for name, value in values.items()
    )
    main = (
        f"<h1>{esc(flow.review_title)}</h1><p>Check your answers before you confirm.</p>"
        + summary_table(rows)
        + f'<form method="get" action="{base}/confirmed">{hidden}<p>'
        f'<button type="submit">Confirm</button> <a class="button ghost" '
        f'href="{href(base, **values)}">Change your answers</a></p></form>'
    )
    return Outcome(f"{flow.review_title}: {item.name}", main)


def _confirmation(site: Site, flow: FlowSpec, item: Item, values: dict[str, str]) -> Outcome:
    rows = [
        (site.spec.noun.capitalize(), item.name),
        *((label, item.field(label)) for label in site.spec.card_fields),
        (site.spec.value_label, item.value_text),
        *_answers(flow, item, values),
    ]
    main = (
        f'<h1>{esc(flow.done_title)}</h1><div class="notice"><p>Thank you, '
        f"{esc(values['name'])}. Your {esc(flow.reference_label.lower())} is</p>"
        f'<p class="reference">{flow_reference(site, item, values)}</p>'
        f"<p>A confirmation has been sent to {esc(values['email'])}.</p></div>"
        + summary_table(rows)
        + '<p><a href="/">Back to the home page</a></p>'
    )
    return Outcome(f"{flow.done_title}: {item.name}", main)

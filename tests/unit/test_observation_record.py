"""The browser worker builds every observation in one place: a failure observation has the same
fields as a page's, page_signals included, and both fit the observation schema."""

from __future__ import annotations

from agents.browser.session import Snapshot, observation_record
from schemas.serde import default_catalog


def test_a_page_and_a_failure_observation_have_the_same_fields():
    snapshot = Snapshot(
        b"jpeg", "jpeg", 10, 20, "http://a.test/", "A", None, None, {}, {"done": "true"}
    )
    page = observation_record(
        "run-000001", 2, snapshot, action_error="no element", timings_ms={"act": 1.0}
    )
    failure = observation_record(
        "run-000001", 3, None, failure="browser crashed", url="http://a.test/"
    )
    assert page.keys() == failure.keys()
    assert page["event_id"] == "run-000001:2:observation"
    assert (page["page_signals"], page["action_error"], page["failure"]) == (
        {"done": "true"},
        "no element",
        None,
    )
    assert (failure["page_signals"], failure["screenshot"]) == ({}, b"")
    assert failure["url"] == "http://a.test/"
    catalog = default_catalog()
    for record in (page, failure):
        assert catalog.decode(catalog.encode("observation", record)).record == record

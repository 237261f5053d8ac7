import pytest

from infra.settings import Settings
from infra.topic_admin import BrokerUnreachable, view_cluster
from infra.topics import TOPICS, episode_topics, event_type, topic_spec
from schemas.serde import default_catalog

DESIGN_TOPICS = {
    "tasks",
    "curriculum",
    "episodes",
    "ops.navigate",
    "ops.act",
    "observations",
    "ops.infer",
    "inferences",
    "trajectories",
    "trajectories.scored",
    "trajectories.success",
    "policy.versions",
    "eval.results",
    "dlq",
}


def test_the_table_has_every_topic_of_the_design_once():
    suffixes = [spec.suffix for spec in TOPICS]
    assert sorted(suffixes) == sorted(DESIGN_TOPICS)


def test_episode_keyed_topics_share_one_partition_count():
    settings = Settings(default_partitions=12)
    counts = {spec.partition_count(settings) for spec in TOPICS if spec.key == "episode_id"}
    assert counts == {12}


def test_compacted_topics_keep_their_latest_value_forever():
    compacted = {spec.suffix for spec in TOPICS if spec.cleanup_policy == "compact"}
    assert compacted == {"tasks", "policy.versions"}
    assert topic_spec("tasks").config() == {
        "cleanup.policy": "compact",
        "max.message.bytes": str(1024 * 1024),
        "retention.ms": "-1",
    }


def test_screenshot_topics_admit_large_messages():
    assert topic_spec("observations").max_message_bytes >= 8 * 1024 * 1024
    assert topic_spec("dlq").max_message_bytes > topic_spec("observations").max_message_bytes


def test_names_use_the_prefix():
    settings = Settings(topic_prefix="lab7")
    assert topic_spec("ops.act").name(settings) == "lab7.ops.act"


def test_every_topic_names_an_event_type_the_catalog_holds():
    catalog = default_catalog()
    for spec in TOPICS:
        assert catalog.latest(spec.event_type).event_type == spec.event_type, spec.suffix
    assert event_type("observations") == "observation"
    assert event_type("trajectories.success") == event_type("trajectories.scored")


def test_episode_topics_are_the_episode_keyed_rows_in_table_order():
    assert episode_topics()[:2] == ("episodes", "ops.navigate")
    assert "tasks" not in episode_topics() and "dlq" not in episode_topics()


class _SilentAdmin:
    """An admin client whose broker never answers: its futures time out."""

    def describe_cluster(self):
        class Pending:
            def result(self, timeout=None):
                raise TimeoutError()

        return Pending()


def test_a_broker_that_never_answers_is_unreachable_not_a_traceback():
    settings = Settings(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(BrokerUnreachable, match="no answer in time.*webgym up"):
        view_cluster(settings, admin=_SilentAdmin())

"""Views of the log: replay, re-scoring, statistics and the live dashboard. Everything here only
reads from Kafka (and writes its own new topics); nothing touches the running system."""

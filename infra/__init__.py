"""Settings, the topic table, Kafka and MinIO clients, the local stack and the CLI."""

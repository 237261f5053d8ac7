"""The online learner: filtered behaviour cloning on the success stream, weights to MinIO."""

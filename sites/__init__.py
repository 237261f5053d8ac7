"""The local practice web: generated multi-page websites with ground truth."""

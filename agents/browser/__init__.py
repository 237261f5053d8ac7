"""Browser workers: operation events in, observation events out (Playwright + Chromium)."""

"""The actor side: browser workers (Playwright) and policy workers (prompt, parser, backends)."""

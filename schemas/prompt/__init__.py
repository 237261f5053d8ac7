"""The prompt contract between the orchestrator and the policy: the context a policy sees
(:mod:`schemas.prompt.context`) and the reply format it must write (:mod:`schemas.prompt.reply`).

Pure Python (json, re): both ``streams/`` and ``agents/`` import it.
"""

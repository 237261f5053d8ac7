"""Stream processors (Faust agents): orchestrator, trajectory assembler, judge, filters, sampler.

Started with ``faust -A streams.app worker``; see DESIGN.md.
"""

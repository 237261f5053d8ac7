"""The policy side: context builder, strict reply parser, model backends, policy workers."""

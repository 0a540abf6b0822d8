"""Setting up a run: the experiment file's models, component params, the registry, overrides and checks."""

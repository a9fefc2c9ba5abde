"""Trainer: the component, its module code (run_fn) and the helpers training uses."""

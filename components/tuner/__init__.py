"""Tuner: the component, its module code (tuner_fn) and the `tuning` config section."""

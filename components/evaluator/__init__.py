"""Evaluator: its TFMA config, metrics, the noise-aware gate, same-task baselines, and reading results back."""

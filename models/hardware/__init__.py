"""The machine: distribution strategy, precision, measured matmul peak and model FLOPs."""

"""What this machine can do: doctor, its measured matmul peak, the default run's estimate."""

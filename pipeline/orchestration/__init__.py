"""Building and running the DAG: the components, the probe and checks before a run, the local runner."""

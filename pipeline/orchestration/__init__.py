"""Building and running the DAG: the checks before a run (preflight), the choices made from them (choose), the
components (dag), the local runner and its lock on the pipeline root."""

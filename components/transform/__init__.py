"""Transform: the module code TFX's Transform runs (in-graph tokenization) and what its statistics say."""

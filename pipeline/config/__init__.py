"""The pipeline's config: the whole run (pipeline_config.py) composed of every stage's section, the cloud and retraining
sections, and the reference generated from their descriptions (reference.py)."""

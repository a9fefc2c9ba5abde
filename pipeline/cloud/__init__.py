"""Vertex AI / Kubeflow: the cloud profile's settings, compiling the spec, submitting runs."""

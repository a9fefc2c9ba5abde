"""The exported model: its signatures, the HF export, and calling it as TF Serving and Vertex do."""

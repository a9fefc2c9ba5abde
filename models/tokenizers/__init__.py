"""In-graph tokenizers that reproduce transformers' ids, family by family."""

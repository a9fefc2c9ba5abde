"""Pretrained models and tokens from a Hugging Face Hub, a packaged copy or an object store."""

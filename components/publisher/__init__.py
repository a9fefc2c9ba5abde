"""HFPublisher: a blessed model's Hugging Face export and model card, optionally pushed to a Hub."""

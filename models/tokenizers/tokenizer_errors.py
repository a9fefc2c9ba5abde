"""The error every tokenizer family raises for a tokenizer it does not reproduce (tokenizer.py adds the
model's folder and the supported families to the message)."""

from models.errors import UserError


class UnsupportedTokenizerError(UserError, ValueError):
    """The model's tokenizer is not one the in-graph tokenizer reproduces; the message names what is supported."""

"""The error every tokenizer family raises for a tokenizer it does not reproduce (tokenizer.py adds the
model's folder and the supported families to the message)."""

from models.errors import UserError


class UnsupportedTokenizerError(UserError, ValueError):
    """The model's tokenizer is not one the in-graph tokenizer reproduces; the message names what is supported."""


class TokenizerFilesDisagree(UserError, ValueError):
    """A vocabulary file beside tokenizer.json (vocab.txt, a SentencePiece .model) says otherwise than the
    tokenizer.json transformers reads; the message names the difference and the fix."""

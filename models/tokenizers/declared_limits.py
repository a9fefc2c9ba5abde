"""A tokenizer.json checked from its raw JSON against stated bounds before anything is built from it.

The file decides how much work and memory every text costs (its longest entry sets the character budget, WordPiece's
max_input_chars_per_word how long a word is searched, its ids the size of the tables `tokenizers` allocates) and
which ids reach the model's embeddings. Trusted, one 1 MB vocab entry turned the budget off, an id of 4,000,000,000
in a 0.1 MB file took 68 s and 15 GB to load, and ids past config.json's vocab_size failed at the first batch after
training had started. Each refusal is one line naming the file, the value and the bound; every bound is far past
any released tokenizer's (Gemma 3's 262,144 entries and 514,906 merges, GPT-2's 128-character entries).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from models.errors import UserError
from models.hub.pretrained import MAX_FILE_BYTES

MAX_VOCAB_ENTRIES = 1_048_576
MAX_MERGES = 2_097_152
MAX_ADDED_TOKENS = 65_536
MAX_ENTRY_CHARS = 1_024  # one vocab entry or added token
MAX_INPUT_CHARS_PER_WORD = 1_000  # WordPiece's longest word searched for pieces (transformers' default: 100)
MAX_SPECIAL_TOKENS = 16  # the post-processor's around one text or a pair (BERT's 2 and 3, RoBERTa's 2 and 4)


class TokenizerLimitError(UserError, ValueError):
    """A tokenizer file past a stated bound, or ids past the model's vocabulary; the message names the file, the
    value and the bound."""


def read_checked(path: Path, vocab_size: int | None) -> dict:
    """tokenizer.json at `path`, parsed, after its size; then check_declared."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise TokenizerLimitError(f"{path} is {size:,} bytes, over the {MAX_FILE_BYTES:,} a tokenizer.json can need")
    try:
        declared = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise TokenizerLimitError(
            f"{path} is not JSON: {error}; save the tokenizer again with save_pretrained"
        ) from None
    check_declared(declared, path, vocab_size)
    return declared


def check_declared(declared: object, path: Path, vocab_size: int | None) -> None:
    """Counts, lengths and ids of a parsed tokenizer.json within the bounds above, and every id below config.json's
    `vocab_size` (None: no config.json, ids below MAX_VOCAB_ENTRIES)."""
    model = declared.get("model") if isinstance(declared, dict) else None
    if not isinstance(model, dict):
        raise TokenizerLimitError(f"{path} has no tokenizer model (a 'model' object); is it a tokenizer.json?")
    vocab = model.get("vocab")
    entries = list(_entries(vocab, path))
    _at_most(len(entries), MAX_VOCAB_ENTRIES, "vocab entries", path)
    added = declared.get("added_tokens") or []
    _at_most(len(added), MAX_ADDED_TOKENS, "added tokens", path)
    entries += [(token.get("content"), token.get("id")) for token in added if isinstance(token, dict)]
    _at_most(len(model.get("merges") or ()), MAX_MERGES, "merges", path)
    if model.get("type") == "WordPiece":
        chars = model.get("max_input_chars_per_word", 100)
        if not isinstance(chars, int) or not 0 < chars <= MAX_INPUT_CHARS_PER_WORD:
            raise TokenizerLimitError(
                f"{path}: WordPiece max_input_chars_per_word {chars!r} is outside 1..{MAX_INPUT_CHARS_PER_WORD:,} "
                "(transformers' default is 100)"
            )
        unk = model.get("unk_token")  # missing altogether, `tokenizers` names the field itself
        if unk is not None and (not isinstance(vocab, dict) or unk not in vocab):
            raise TokenizerLimitError(
                f"{path}: the WordPiece unk_token {unk!r} is not in its vocab: every word it cannot split would have "
                "no id. Add the token to the vocab or name one that is there"
            )
    limit = vocab_size if vocab_size is not None else MAX_VOCAB_ENTRIES
    source = "config.json's vocab_size" if vocab_size is not None else "the bound on vocab entries"
    for token, token_id in entries:
        if not isinstance(token, str) or len(token) > MAX_ENTRY_CHARS:
            shown = f"{len(token):,} characters" if isinstance(token, str) else repr(token)[:40]
            raise TokenizerLimitError(
                f"{path}: the entry of id {token_id!r} is {shown}, over the {MAX_ENTRY_CHARS:,} one token can hold"
            )
        if not isinstance(token_id, int) or isinstance(token_id, bool) or not 0 <= token_id < limit:
            raise TokenizerLimitError(
                f"{path}: {token[:40]!r} has id {token_id!r}, outside 0..{limit - 1:,} ({source}): the model has no "
                "embedding for it. Use the tokenizer saved with this model"
            )


def check_special_count(count: int, path: Path) -> None:
    _at_most(count, MAX_SPECIAL_TOKENS, "special tokens its post-processor puts around a text", path)


def _entries(vocab: object, path: Path) -> Iterator[tuple[object, object]]:
    """(token, id) of a WordPiece/BPE vocab (a mapping) or a Unigram one ([piece, score] pairs, ids by place)."""
    if isinstance(vocab, dict):
        yield from vocab.items()
    elif isinstance(vocab, list):
        for index, entry in enumerate(vocab):
            yield (entry[0] if isinstance(entry, list) and entry else entry), index
    else:
        raise TokenizerLimitError(f"{path} has no vocab in its model (found {type(vocab).__name__})")


def _at_most(count: int, bound: int, what: str, path: Path) -> None:
    if count > bound:
        raise TokenizerLimitError(f"{path} declares {count:,} {what}, over the {bound:,} this pipeline takes")

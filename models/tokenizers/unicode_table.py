"""`python -m models.tokenizers.unicode_table`: derives unicode_compat.DISAGREEMENTS again from the installed tokenizers
and tensorflow-text and rewrites it in place. Its own module, so unicode_compat does not import the wordpiece
tokenizer that imports it."""

from __future__ import annotations

import sys

from models.tokenizers import unicode_compat, wordpiece

if __name__ == "__main__":
    table = unicode_compat.derive_disagreements(wordpiece.clean_and_fold, wordpiece.split_words)
    unicode_compat.write_table(table)
    print(f"{sum(b - a + 1 for runs in table.values() for a, b in runs)} code points", file=sys.stderr)

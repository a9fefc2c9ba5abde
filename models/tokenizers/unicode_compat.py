"""Characters whose Unicode category Hugging Face's `tokenizers` and TensorFlow disagree on, and what HF does.

`tokenizers` classifies characters with Unicode tables older than TensorFlow's RE2/ICU ones: about 820
characters added to Unicode since (Arabic Quranic marks, new punctuation, CJK extension ideographs, ...) are
ordinary letters to HF but marks, punctuation or format characters to TF, which would strip, split or drop
them; a few changed category between versions. The in-graph tokenizer first rewrites each of them to what HF
does with it (`rewrite_for_hf`), so its ids stay HF's.

The table is derived from the two installed libraries by `python -m models.tokenizers.unicode_table`, which rewrites
`DISAGREEMENTS` below; `unicode_compat_test` re-derives it and fails after an upgrade of `tokenizers`,
`tensorflow` or `tensorflow-text` changes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

# What a character does in a BERT tokenizer: dropped (clean_text), becomes a space, stripped as an accent
# (only when the tokenizer strips accents), split off as its own word (punctuation, CJK), or stays in a word.
TREATMENTS = ("dropped", "space", "accent", "split", "letter")

# Code point ranges (inclusive) by HF's treatment, only where TensorFlow's would differ.
# BEGIN GENERATED
# by `python -m models.tokenizers.unicode_table` with tokenizers 0.22.2, tensorflow-text 2.21.1
DISAGREEMENTS: dict[str, tuple[tuple[int, int], ...]] = {
    "accent": ((0x1734, 0x1734),),
    "letter": (
        (0x61D, 0x61D),
        (0x7FD, 0x7FD),
        (0x890, 0x891),
        (0x898, 0x89F),
        (0x8CA, 0x8E2),
        (0x9FD, 0x9FE),
        (0xA76, 0xA76),
        (0xAFA, 0xAFF),
        (0xB55, 0xB55),
        (0xC04, 0xC04),
        (0xC3C, 0xC3C),
        (0xC77, 0xC77),
        (0xC84, 0xC84),
        (0xD00, 0xD00),
        (0xD3B, 0xD3C),
        (0xD81, 0xD81),
        (0xEBA, 0xEBA),
        (0xECE, 0xECE),
        (0x180F, 0x180F),
        (0x1885, 0x1886),
        (0x1ABF, 0x1ACE),
        (0x1B7D, 0x1B7E),
        (0x1DF6, 0x1DFB),
        (0x2E43, 0x2E4F),
        (0x2E52, 0x2E5D),
        (0xA82C, 0xA82C),
        (0xA8C5, 0xA8C5),
        (0xA8FF, 0xA8FF),
        (0xA9BD, 0xA9BD),
        (0x10D24, 0x10D27),
        (0x10EAB, 0x10EAD),
        (0x10EFD, 0x10EFF),
        (0x10F46, 0x10F50),
        (0x10F55, 0x10F59),
        (0x10F82, 0x10F89),
        (0x11070, 0x11070),
        (0x11073, 0x11074),
        (0x110C2, 0x110C2),
        (0x110CD, 0x110CD),
        (0x111CF, 0x111CF),
        (0x1123E, 0x1123E),
        (0x11241, 0x11241),
        (0x1133B, 0x1133B),
        (0x11438, 0x1143F),
        (0x11442, 0x11444),
        (0x11446, 0x11446),
        (0x1144B, 0x1144F),
        (0x1145A, 0x1145B),
        (0x1145D, 0x1145E),
        (0x11660, 0x1166C),
        (0x116B9, 0x116B9),
        (0x1182F, 0x11837),
        (0x11839, 0x1183B),
        (0x1193B, 0x1193C),
        (0x1193E, 0x1193E),
        (0x11943, 0x11946),
        (0x119D4, 0x119D7),
        (0x119DA, 0x119DB),
        (0x119E0, 0x119E0),
        (0x119E2, 0x119E2),
        (0x11A01, 0x11A0A),
        (0x11A33, 0x11A38),
        (0x11A3B, 0x11A47),
        (0x11A51, 0x11A56),
        (0x11A59, 0x11A5B),
        (0x11A8A, 0x11A96),
        (0x11A98, 0x11A9C),
        (0x11A9E, 0x11AA2),
        (0x11B00, 0x11B09),
        (0x11C30, 0x11C36),
        (0x11C38, 0x11C3D),
        (0x11C3F, 0x11C3F),
        (0x11C41, 0x11C45),
        (0x11C70, 0x11C71),
        (0x11C92, 0x11CA7),
        (0x11CAA, 0x11CB0),
        (0x11CB2, 0x11CB3),
        (0x11CB5, 0x11CB6),
        (0x11D31, 0x11D36),
        (0x11D3A, 0x11D3A),
        (0x11D3C, 0x11D3D),
        (0x11D3F, 0x11D45),
        (0x11D47, 0x11D47),
        (0x11D90, 0x11D91),
        (0x11D95, 0x11D95),
        (0x11D97, 0x11D97),
        (0x11EF3, 0x11EF4),
        (0x11EF7, 0x11EF8),
        (0x11F00, 0x11F01),
        (0x11F36, 0x11F3A),
        (0x11F40, 0x11F40),
        (0x11F42, 0x11F4F),
        (0x11FFF, 0x11FFF),
        (0x12FF1, 0x12FF2),
        (0x13430, 0x13440),
        (0x13447, 0x13455),
        (0x16E97, 0x16E9A),
        (0x16F4F, 0x16F4F),
        (0x16FE2, 0x16FE2),
        (0x16FE4, 0x16FE4),
        (0x1CF00, 0x1CF2D),
        (0x1CF30, 0x1CF46),
        (0x1E000, 0x1E006),
        (0x1E008, 0x1E018),
        (0x1E01B, 0x1E021),
        (0x1E023, 0x1E024),
        (0x1E026, 0x1E02A),
        (0x1E08F, 0x1E08F),
        (0x1E130, 0x1E136),
        (0x1E2AE, 0x1E2AE),
        (0x1E2EC, 0x1E2EF),
        (0x1E4EC, 0x1E4EF),
        (0x1E944, 0x1E94A),
        (0x1E95E, 0x1E95F),
        (0x2B820, 0x2B91F),
    ),
    "split": (
        (0x166D, 0x166D),
        (0x111C9, 0x111C9),
    ),
}
# END GENERATED


def ranges(code_points: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Sorted code points -> inclusive (first, last) runs."""
    runs: list[list[int]] = []
    for point in sorted(code_points):
        if runs and point == runs[-1][1] + 1:
            runs[-1][1] = point
        else:
            runs.append([point, point])
    return tuple((first, last) for first, last in runs)


def character_class(runs: Sequence[tuple[int, int]]) -> str:
    """An RE2 character class matching the runs."""
    return "[" + "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in runs) + "]"


# Stands in for a character HF keeps inside a word but TF would not: a letter to TF too (Lycian, Lisu, Vai,
# Old Italic: no case, no decomposition, not CJK). The first absent from every vocab entry is used, so the
# word becomes [UNK] exactly as HF's does when no vocab entry holds the original character.
PLACEHOLDER_CANDIDATES = ("\U00010280", "\ua4d0", "\ua500", "\U00010300", "\U000102a0")


def placeholder_for(vocab: Iterable[str]) -> str:
    """The first candidate no vocab entry contains."""
    seen = set("".join(vocab))
    for candidate in PLACEHOLDER_CANDIDATES:
        if candidate not in seen:
            return candidate
    raise ValueError("every placeholder candidate occurs in the vocab; add one to PLACEHOLDER_CANDIDATES")


def vocab_characters_in_disagreement(vocab: Iterable[str]) -> set[str]:
    """Characters of the vocab whose ids could differ from HF's (the rewrite turns them into [UNK])."""
    seen = {ord(char) for char in "".join(vocab)}
    return {chr(p) for runs in DISAGREEMENTS.values() for a, b in runs for p in range(a, b + 1) if p in seen}


def rewrite_for_hf(texts, placeholder: str, strip_accents: bool):
    """texts with every character of DISAGREEMENTS rewritten to what HF does with it (before normalizing)."""
    import tensorflow as tf

    replacement = {
        "dropped": "",
        "space": " ",
        "accent": "" if strip_accents else placeholder,
        "split": f" {placeholder} ",
        "letter": placeholder,
    }
    for treatment, runs in DISAGREEMENTS.items():
        texts = tf.strings.regex_replace(texts, character_class(runs), replacement[treatment])
    return texts


def _all_characters() -> list[str]:
    return [chr(point) for point in range(0x110000) if not 0xD800 <= point < 0xE000]  # no lone surrogates


def hf_treatments(characters: Sequence[str]) -> list[str]:
    """Each character's treatment by `tokenizers`' own BertNormalizer and BertPreTokenizer."""
    from tokenizers import normalizers, pre_tokenizers

    def normalizer(**flags):
        options = {"clean_text": False, "handle_chinese_chars": False, "strip_accents": False, "lowercase": False}
        return normalizers.BertNormalizer(**(options | flags))

    clean, strip, chinese = (
        normalizer(clean_text=True),
        normalizer(strip_accents=True),
        normalizer(handle_chinese_chars=True),
    )
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    treatments = []
    for char in characters:
        cleaned = clean.normalize_str(char)
        words = [word for word, _ in pre_tokenizer.pre_tokenize_str(f"a{char}b")]
        if cleaned == "":
            treatments.append("dropped")
        elif cleaned == " " or words == ["a", "b"]:
            treatments.append("space")
        elif strip.normalize_str(char) == "":
            treatments.append("accent")
        elif chinese.normalize_str(char) != char or words == ["a", char, "b"]:
            treatments.append("split")
        else:
            treatments.append("letter")
    return treatments


def tf_treatments(characters: Sequence[str], normalize: Callable, split_words: Callable) -> list[str]:
    """Each character's treatment by the in-graph tokenizer's own steps, before any rewrite.

    normalize(texts, lower_case, strip_accents) and split_words(texts) are the tokenizer's, passed in because
    the tokenizer imports this module.
    """
    import tensorflow as tf

    singles = tf.constant(list(characters))
    kept = normalize(singles, lower_case=False, strip_accents=False).numpy()
    unaccented = normalize(singles, lower_case=False, strip_accents=True).numpy()
    in_words = tf.constant([f"a{c}b" for c in characters])
    words = split_words(normalize(in_words, lower_case=False, strip_accents=False)).to_list()
    treatments = []
    for char, kept_form, unaccented_form, split in zip(characters, kept, unaccented, words, strict=True):
        split = [word.decode() for word in split]
        if kept_form == b"":
            treatments.append("dropped")
        elif kept_form == b" " or split == ["a", "b"]:
            treatments.append("space")
        elif unaccented_form == b"":
            treatments.append("accent")
        elif split == ["a", char, "b"]:
            treatments.append("split")
        else:
            treatments.append("letter")
    return treatments


def derive_disagreements(normalize: Callable, split_words: Callable) -> dict[str, tuple[tuple[int, int], ...]]:
    """The table, from the installed libraries (about 15 s)."""
    characters = _all_characters()
    hf, ours = hf_treatments(characters), tf_treatments(characters, normalize, split_words)
    by_treatment: dict[str, list[int]] = {}
    for char, theirs, mine in zip(characters, hf, ours, strict=True):
        if theirs != mine:
            by_treatment.setdefault(theirs, []).append(ord(char))
    return {treatment: ranges(points) for treatment, points in sorted(by_treatment.items())}


def write_table(table: dict[str, tuple[tuple[int, int], ...]]) -> None:
    import tensorflow_text
    import tokenizers

    lines = [
        f"# by `python -m models.tokenizers.unicode_table` with tokenizers {tokenizers.__version__}, "
        f"tensorflow-text {tensorflow_text.__version__}",
        "DISAGREEMENTS: dict[str, tuple[tuple[int, int], ...]] = {",
    ]
    for treatment, runs in table.items():
        lines.append(f'    "{treatment}": (')
        row: list[str] = []
        for cell in (f"(0x{a:X}, 0x{b:X})," for a, b in runs):
            if len("        " + " ".join([*row, cell])) > 118:
                lines.append("        " + " ".join(row))
                row = []
            row.append(cell)
        lines.append("        " + " ".join(row))
        lines.append("    ),")
    lines.append("}")
    source = Path(__file__).read_text()
    begin, end = source.index("# BEGIN GENERATED\n") + len("# BEGIN GENERATED\n"), source.index("# END GENERATED")
    Path(__file__).write_text(source[:begin] + "\n".join(lines) + "\n" + source[end:])

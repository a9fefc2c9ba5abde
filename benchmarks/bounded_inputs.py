"""`make bench-inputs`: what the bounds on one text cost ordinary texts, and what they save on a hostile one.

Two figures, each a ratio of things measured in the same run, beside the fp32 matmul peak measured then:
- the in-graph tokenizer with the character budget vs without it, on the packaged corpus (texts/s, best of
  interleaved repeats: the budget must cost ordinary texts nothing);
- the corpus' letters as one word without spaces (1.4 MB by default) through the byte-level BPE tokenizer, against
  its first budget's worth of letters (seconds: what a request of it costs a server). Whole, the same word is
  measured only up to --whole-chars, since its merge rounds grow with its length (minutes at 1.4 MB);
- each family's tokenizer on 1.4 MB of spaces, newlines, NBSP and U+3000 beside 1.4 MB of letters: seconds and
  each call's peak memory;
- "a a a ..." at the budget of a byte-level tokenizer whose longest vocab entry is 64 characters (GPT-2's and
  Llama-3's splits), "a" followed by reversed runs of combining marks, and a 1 MB document among the length sample's
  reviews (what `--check` counts), each beside ordinary text of the same size: seconds and each call's peak memory.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

from benchmarks import reference

SECTION = "## Bounded inputs: the character budget and byte-level BPE's word pieces (`make bench-inputs`)"


def _texts_per_second(tokenizers: dict, texts: list[str], repeats: int) -> dict[str, float]:
    """Best texts/s of each tokenizer over `repeats` interleaved passes (the order alternates)."""
    import tensorflow as tf

    calls = {
        name: tf.function(lambda t, tok=tok: tok(t)["input_ids"], input_signature=[tf.TensorSpec([None], tf.string)])
        for name, tok in tokenizers.items()
    }
    batches = [tf.constant(texts[i : i + 256]) for i in range(0, len(texts), 256)]
    for call in calls.values():
        call(batches[0])
    best = dict.fromkeys(calls, 0.0)
    for repeat in range(repeats):
        for name in list(calls)[:: 1 if repeat % 2 else -1]:
            started = time.perf_counter()
            for batch in batches:
                calls[name](batch)
            best[name] = max(best[name], len(texts) / (time.perf_counter() - started))
    return best


def _seconds(tokenizer, text: str) -> float:
    import tensorflow as tf

    started = time.perf_counter()
    tokenizer(tf.constant([text]))
    return time.perf_counter() - started


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-rows", type=int, default=0, help="reviews of the packaged corpus (0: all)")
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--word-chars", type=int, default=1_400_000, help="the hostile word's length")
    parser.add_argument("--whole-chars", type=int, default=20_000, help="the longest word measured whole")
    parser.add_argument("--widths", default="64,512", help="model widths the BPE word is measured at")
    parser.add_argument("--out", default=str(reference.BENCHMARKS_MD))
    return parser.parse_args(argv)


def wordpiece_row(texts: list[str], repeats: int) -> list[str]:
    """MiniLM's WordPiece over the reviews, with the character budget and without."""
    from models.hub.pretrained import resolve_model_dir
    from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec

    spec = tokenizer_spec(resolve_model_dir("packaged:all-MiniLM-L6-v2", None))
    whole = InGraphTokenizer(spec, 128)
    whole.character_budget = None  # texts tokenized whole: the baseline the budget's cost is read against
    rates = _texts_per_second({"budget": InGraphTokenizer(spec, 128), "whole": whole}, texts, repeats)
    return [
        f"MiniLM's WordPiece at width 128, {len(texts):,} reviews: with the budget vs without (texts/s)",
        f"{rates['budget']:,.0f}",
        f"{rates['whole']:,.0f}",
        f"{rates['budget'] / rates['whole']:.2f}x",
    ]


def roberta_tokenizer():
    """The tests' RoBERTa-style tokenizer (no model needed): the merge rounds, not the model, are measured."""
    from models.tokenizers.tokenizer import tokenizer_spec
    from tests.model_families import write_tokenizer

    roberta_dir = Path(tempfile.mkdtemp(prefix="bench-roberta-"))
    write_tokenizer("roberta", roberta_dir)
    return tokenizer_spec(roberta_dir)


def hostile_word_rows(roberta, letters: str, width: int, whole_chars: int) -> list[list[str]]:
    """Byte-level BPE at `width` on one huge word: cut to its budget vs its first budget letters, and a shorter
    word merged whole (no budget, no pieces) vs as served."""
    from models.tokenizers.byte_level_bpe import ByteLevelBPE
    from models.tokenizers.tokenizer import InGraphTokenizer

    cut, whole = InGraphTokenizer(roberta, width), InGraphTokenizer(roberta, width)
    whole.character_budget = None
    whole._pieces = ByteLevelBPE(roberta.pieces, max_word_bytes=2**30)  # the word merged whole, as before
    _seconds(cut, "warm up"), _seconds(whole, "warm up")
    budget = cut.character_budget.head
    hostile, at_budget = _seconds(cut, letters), _seconds(cut, letters[:budget])
    short = letters[: min(whole_chars, len(letters))]
    whole_seconds, cut_seconds = _seconds(whole, short), _seconds(cut, short)
    return [
        [
            f"byte-level BPE at width {width}: the corpus as one {len(letters):,}-letter word vs its first "
            f"{budget:,} (s)",
            f"{hostile:.2f}",
            f"{at_budget:.2f}",
            f"{hostile / at_budget:.2f}x",
        ],
        [
            f"· its first {len(short):,} letters merged whole (no budget, no pieces) vs as served (s)",
            f"{whole_seconds:.2f}",
            f"{cut_seconds:.2f}",
            f"{whole_seconds / cut_seconds:.2f}x",
        ],
    ]


WHITESPACE_KINDS = {"spaces": " ", "newlines": "\n", "NBSP": "\u00a0", "U+3000": "\u3000"}
FAMILY_TOKENIZERS = {  # the tests' tokenizers of each family (tests/model_families.py), trained on the corpus
    "roberta": "byte-level BPE", "xlm-roberta": "SentencePiece", "deberta-v2": "SentencePiece (DeBERTa-v3)",
    "albert": "SentencePiece (ALBERT)", "mpnet": "WordPiece",
}  # fmt: skip


def _peak_mib_of(call) -> tuple[float, float]:
    """(seconds, MiB the process' peak resident memory rose to above its size before) of call(): the peak is reset
    first (Linux's /proc/self/clear_refs), so each call's own peak is read."""
    status = Path("/proc/self/status")

    def kib(field: str) -> int:
        return int(next(line.split()[1] for line in status.read_text().splitlines() if line.startswith(field)))

    Path("/proc/self/clear_refs").write_text("5")
    before = kib("VmRSS:")
    started = time.perf_counter()
    call()
    return time.perf_counter() - started, (kib("VmHWM:") - before) / 1024


def whitespace_rows(letters: str, width: int) -> list[list[str]]:
    """Each family's tokenizer at `width` on 1.4 MB (as UTF-8) of one whitespace character, beside the same bytes
    of letters: seconds and the call's peak memory. Whitespace counts against the budget where the family makes
    tokens of it (byte-level BPE), so no character makes a text cost more than its budget's worth."""
    import tensorflow as tf

    from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec
    from tests.model_families import write_tokenizer

    rows = []
    for family, kind in FAMILY_TOKENIZERS.items():
        directory = Path(tempfile.mkdtemp(prefix=f"bench-{family}-"))
        write_tokenizer(family, directory)
        tokenizer = InGraphTokenizer(tokenizer_spec(directory), width)
        tokenizer(tf.constant(["warm up the ops"]))
        base_seconds, base_mib = _peak_mib_of(lambda tok=tokenizer: tok(tf.constant([letters])))
        for name, char in WHITESPACE_KINDS.items():
            text = char * (len(letters) // len(char.encode()))
            seconds, mib = _peak_mib_of(lambda t=text, tok=tokenizer: tok(tf.constant([t])))
            rows.append([
                f"{kind} at width {width}: {len(text.encode()) / 1e6:.1f} MB of {name} vs of letters (s; peak MiB)",
                f"{seconds:.2f}; {mib:,.0f}",
                f"{base_seconds:.2f}; {base_mib:,.0f}",
                f"{seconds / base_seconds:.2f}x",
            ])  # fmt: skip
    return rows


LONG_ENTRY_FAMILIES = {"roberta": "GPT-2's split (RoBERTa, ModernBERT)", "llama-3": "Llama-3's split (EuroBERT)"}


def _with_long_entry(family: str, chars: int):
    """The tests' tokenizer of `family` with one more vocab entry of `chars` letters: it sets the character budget."""
    import json

    from models.tokenizers.tokenizer import tokenizer_spec
    from tests.model_families import write_tokenizer

    directory = Path(tempfile.mkdtemp(prefix=f"bench-{family}-"))
    write_tokenizer(family, directory)
    declared = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = declared["model"]["vocab"]
    vocab["x" * chars] = max(vocab.values()) + 1 + len(declared.get("added_tokens") or [])
    (directory / "tokenizer.json").write_text(json.dumps(declared), encoding="utf-8")
    return tokenizer_spec(directory)


def one_letter_words_rows(letters: str, width: int) -> list[list[str]]:
    """Byte-level BPE at `width` on "a a a ..." (the most words its budget holds) against the same bytes of letters,
    with a 64-character vocab entry setting that budget."""
    import tensorflow as tf

    from models.tokenizers.tokenizer import InGraphTokenizer

    rows = []
    for family, split in LONG_ENTRY_FAMILIES.items():
        tokenizer = InGraphTokenizer(_with_long_entry(family, 64), width)
        tokenizer(tf.constant(["warm up the ops"]))
        words = "a " * (len(letters) // 2)
        seconds, mib = _peak_mib_of(lambda tok=tokenizer, t=words: tok(tf.constant([t])))
        base_seconds, base_mib = _peak_mib_of(lambda tok=tokenizer: tok(tf.constant([letters])))
        rows.append([
            f"byte-level BPE, {split}, at width {width} with a 64-character entry (budget "
            f"{tokenizer.character_budget.head:,}): {len(words.encode()) / 1e6:.1f} MB of \"a a a ...\" vs of letters "
            "(s; peak MiB)",
            f"{seconds:.2f}; {mib:,.0f}",
            f"{base_seconds:.2f}; {base_mib:,.0f}",
            f"{seconds / base_seconds:.2f}x",
        ])  # fmt: skip
    return rows


def combining_marks_rows(letters: str, width: int) -> list[list[str]]:
    """MiniLM's WordPiece (the served default) at `width` and with 4 windows on "a" + k x U+0301 + k x U+0316
    (normalization reorders each run of marks), against the same bytes of letters."""
    import tensorflow as tf

    from models.hub.pretrained import resolve_model_dir
    from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec

    spec = tokenizer_spec(resolve_model_dir("packaged:all-MiniLM-L6-v2", None))
    marks = len(letters) // 4  # two bytes each, two runs
    text = "a" + "\u0301" * marks + "\u0316" * marks
    rows = []
    for windows in (None, (0.5, 4)):
        tokenizer = InGraphTokenizer(spec, width, windows=windows)
        tokenizer(tf.constant(["warm up the ops"]))
        seconds, mib = _peak_mib_of(lambda tok=tokenizer: tok(tf.constant([text])))
        base_seconds, base_mib = _peak_mib_of(lambda tok=tokenizer: tok(tf.constant([letters])))
        shape = f"width {width}" + (f", {windows[1]} windows" if windows else "")
        rows.append([
            f"WordPiece (MiniLM) at {shape}: {len(text.encode()) / 1e6:.1f} MB of a letter and two reversed runs of "
            "combining marks vs of letters (s; peak MiB)",
            f"{seconds:.2f}; {mib:,.0f}",
            f"{base_seconds:.2f}; {base_mib:,.0f}",
            f"{seconds / base_seconds:.2f}x",
        ])  # fmt: skip
    return rows


def length_sample_rows(texts: list[str], position_limit: int) -> list[list[str]]:
    """What `--check` counts: 1,023 reviews with a 1 MB document among them, against 1,024 reviews, through each
    family's length sample (models.training.lengths.token_lengths) for a model of `position_limit` positions."""
    from types import SimpleNamespace

    from models.hub.pretrained import resolve_model_dir
    from models.training.lengths import token_lengths
    from tests.model_families import write_tokenizer

    document = " ".join(texts)
    document = (document * (1_000_000 // len(document) + 1))[:1_000_000]
    folders = {"WordPiece (MiniLM)": resolve_model_dir("packaged:all-MiniLM-L6-v2", None)}
    for family, kind in (("roberta", "byte-level BPE"), ("xlm-roberta", "SentencePiece")):
        folders[kind] = Path(tempfile.mkdtemp(prefix=f"bench-{family}-"))
        write_tokenizer(family, folders[kind])
    rows = []
    for kind, folder in folders.items():
        reviews = [SimpleNamespace(text=t, text_pair=None) for t in texts[:1024]]
        with_document = [SimpleNamespace(text=document, text_pair=None), *reviews[:1023]]
        token_lengths(folder, reviews[:8], position_limit)  # builds the ops once
        seconds, mib = _peak_mib_of(lambda f=folder, r=with_document: token_lengths(f, r, position_limit))
        base_seconds, base_mib = _peak_mib_of(lambda f=folder, r=reviews: token_lengths(f, r, position_limit))
        rows.append([
            f"{kind}, --check's length sample for {position_limit} positions: a 1 MB document among 1,023 reviews "
            "vs 1,024 reviews (s; peak MiB)",
            f"{seconds:.2f}; {mib:,.0f}",
            f"{base_seconds:.2f}; {base_mib:,.0f}",
            f"{seconds / base_seconds:.2f}x",
        ])  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from components.example_gen.sources import rotten_tomatoes_reviews
    from models.hardware.machine_peak import matmul_peak

    started = time.monotonic()
    peak = matmul_peak().gflops
    texts = list(rotten_tomatoes_reviews()["text"])[: args.corpus_rows or None]
    rows = [wordpiece_row(texts, args.repeats)]
    # The corpus with everything but its letters removed: English that byte-level BPE merges a lot, as one word
    spaceless = re.sub("[^a-z]", "", " ".join(rotten_tomatoes_reviews()["text"]).lower())
    letters = (spaceless * (args.word_chars // len(spaceless) + 1))[: args.word_chars]
    roberta = roberta_tokenizer()
    for width in (int(w) for w in args.widths.split(",")):
        rows.extend(hostile_word_rows(roberta, letters, width, args.whole_chars))
    widest = max(int(w) for w in args.widths.split(","))
    rows.extend(whitespace_rows(letters, widest))
    rows.extend(one_letter_words_rows(letters, widest))
    rows.extend(combining_marks_rows(letters, widest))
    rows.extend(length_sample_rows(texts, widest))
    section = reference.table_section(
        SECTION,
        [
            f"Measured on this machine in {time.monotonic() - started:.0f} s, fp32 matmul peak {peak:.0f} GFLOP/s "
            "measured in the same run. The character budget cuts a text to twice the characters its model's width "
            "can reach before tokenizing; byte-level BPE merges a word of over 256 bytes in pieces (its rounds "
            "are one per merge); whitespace counts against the budget where the family makes tokens of it "
            "(byte-level BPE). The tokenizers are the tests' of each family, trained on the corpus (the tokenizer, "
            "not a model, is what is measured); peak MiB is each call's own peak above the process before it."
        ],
        ["what", "measured", "baseline", "ratio"],
        ["---", "---:", "---:", "---:"],
        rows,
    )
    reference.publish_sections([section], Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

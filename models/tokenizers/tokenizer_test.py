"""The in-graph tokenizer must give Hugging Face's ids and masks, id for id."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from models.tokenizers.tokenizer import InGraphTokenizer, UnsupportedTokenizerError, tokenizer_spec
from tests.model_families import EDGE_CASES, fuzz_text

FUZZ_TEXT = fuzz_text()


@pytest.fixture(scope="module")
def hf_tokenizer(packaged_model_dir):
    return AutoTokenizer.from_pretrained(packaged_model_dir)


@pytest.fixture(scope="module")
def spec(packaged_model_dir):
    return tokenizer_spec(packaged_model_dir)


def _compare(texts, spec, hf_tokenizer, max_len, pairs=None):
    ours = InGraphTokenizer(spec, max_len)(tf.constant(texts), None if pairs is None else tf.constant(pairs))
    theirs = hf_tokenizer(texts, pairs, padding="max_length", truncation="longest_first", max_length=max_len)
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        expected = np.array(theirs[key])
        actual = ours[key].numpy()
        assert actual.shape == (len(texts), max_len)
        mismatched = np.where((actual != expected).any(axis=1))[0]
        assert not len(mismatched), f"{key} differs for {[texts[i][:60] for i in mismatched[:5]]}"


@pytest.mark.parametrize("max_len", [64, 128])
def test_parity_with_hf_on_the_whole_corpus_and_edge_cases(spec, hf_tokenizer, max_len, review_texts):
    corpus = review_texts
    assert len(corpus) >= 500
    _compare(list(corpus) + EDGE_CASES, spec, hf_tokenizer, max_len)


@pytest.mark.parametrize("max_len", [16, 33, 64])
def test_pair_parity_with_hf_longest_first_truncation(spec, hf_tokenizer, max_len, review_texts):
    """Sentence pairs: [CLS] a [SEP] b [SEP], token_type_ids 0/1, HF's longest_first truncation, on corpus
    pairs of every length mix (short+long, long+short, both long, equal lengths) and the edge cases."""
    corpus = review_texts[:1500]
    firsts = corpus[::2] + EDGE_CASES + EDGE_CASES + ["same length here"] * 3
    seconds = corpus[1::2][: len(corpus[::2])] + EDGE_CASES[::-1] + EDGE_CASES + ["same words there", "a", "b " * 40]
    _compare(firsts, spec, hf_tokenizer, max_len, pairs=seconds)


def test_pair_token_count_is_both_segments_before_truncation(spec, hf_tokenizer):
    out = InGraphTokenizer(spec, 16)(tf.constant(["word " * 30]), tf.constant(["short one"]))
    assert out["token_count"].numpy().tolist() == [30 + len(hf_tokenizer.tokenize("short one"))]
    # budget 13: "short one" keeps its 2 tokens, the long text 11: [CLS] 11 [SEP] | 2 [SEP]
    assert out["token_type_ids"].numpy()[0].tolist() == [0] * 13 + [1] * 3
    assert out["truncated"].numpy().tolist() == [True]
    fits = InGraphTokenizer(spec, 16)(tf.constant(["word " * 11]), tf.constant(["short one"]))
    assert fits["truncated"].numpy().tolist() == [False]  # 11 + 2 tokens fill the budget of 13 exactly


def test_token_count_reports_length_before_truncation(spec, hf_tokenizer):
    texts = ["word " * 100, "short one"]
    counts = InGraphTokenizer(spec, 16)(tf.constant(texts))["token_count"].numpy()
    assert counts.tolist() == [len(hf_tokenizer.tokenize(t)) for t in texts]
    assert counts[0] == 100
    truncated = InGraphTokenizer(spec, 16)(tf.constant([*texts, "word " * 14]))["truncated"].numpy()
    assert truncated.tolist() == [True, False, False]  # 14 tokens + [CLS] + [SEP] fit 16


def test_spec_reads_the_hf_tokenizer_settings(spec):
    assert spec.family == "WordPiece"
    assert spec.pieces.lower_case and spec.pieces.strip_accents
    assert (spec.pad_id, spec.pieces.unk_token, spec.unk_id) == (0, "[UNK]", 100)
    assert [(slot.segment, slot.token_id) for slot in spec.layout.pair] == [
        (None, 101),
        (0, -1),
        (None, 102),
        (1, -1),
        (None, 102),
    ]
    assert spec.takes_token_type_ids


def test_non_wordpiece_tokenizers_are_refused_by_name(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train_from_iterator(
        ["a small corpus for a byte pair model"] * 10, trainers.BpeTrainer(special_tokens=["<unk>"])
    )
    PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>").save_pretrained(tmp_path)
    with pytest.raises(
        UnsupportedTokenizerError, match=r"BPE tokenizer with pre-tokenizer \['Whitespace'\].*supports WordPiece"
    ):
        tokenizer_spec(tmp_path)


# Random unicode: every category but lone surrogates (which cannot be UTF-8), control characters included.
FUZZ_LONG = st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=2000, max_size=5000)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(FUZZ_TEXT | FUZZ_LONG, min_size=1, max_size=6))
def test_fuzzed_text_keeps_fixed_shapes_and_ids_in_the_vocab(spec, hf_tokenizer, texts):
    max_len = 32
    out = InGraphTokenizer(spec, max_len)(tf.constant(texts))
    ids, mask = out["input_ids"].numpy(), out["attention_mask"].numpy()
    assert ids.shape == mask.shape == (len(texts), max_len)
    assert ((ids >= 0) & (ids < spec.vocab_size)).all()
    assert set(np.unique(mask)) <= {0, 1}
    lengths = mask.sum(axis=1)
    assert (lengths >= 2).all()  # [CLS] and [SEP] at least
    for row, length in zip(ids, lengths, strict=True):
        assert row[0] == 101 and row[length - 1] == 102 and (row[length:] == spec.pad_id).all()  # [CLS] [SEP]
    # and still HF's ids, id for id
    expected = np.array(hf_tokenizer(texts, padding="max_length", truncation=True, max_length=max_len)["input_ids"])
    np.testing.assert_array_equal(ids, expected)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=st.lists(st.tuples(FUZZ_TEXT, FUZZ_TEXT), min_size=1, max_size=6), max_len=st.integers(8, 40))
@example(pairs=[("", "\U0001cf00")], max_len=8)  # a mark to TF's Unicode tables, a letter to HF's
def test_fuzzed_pairs_match_hf(spec, hf_tokenizer, pairs, max_len):
    firsts, seconds = [a for a, _ in pairs], [b for _, b in pairs]
    _compare(firsts, spec, hf_tokenizer, max_len, pairs=seconds)


def test_the_settings_are_read_again_when_the_tokenizer_files_change(tmp_path, packaged_model_dir):
    """tokenizer_spec remembers a folder's settings (Transform asks nine times a run) until its files change."""
    import json
    import shutil

    from tests.tiny_model import TOKENIZER_FILES

    for name in TOKENIZER_FILES:
        if (packaged_model_dir / name).exists():
            shutil.copy(packaged_model_dir / name, tmp_path / name)
    assert tokenizer_spec(tmp_path).pieces.lower_case
    assert tokenizer_spec(tmp_path) is tokenizer_spec(str(tmp_path))
    settings = json.loads((tmp_path / "tokenizer_config.json").read_text())
    settings["do_lower_case"] = False
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings))
    assert not tokenizer_spec(tmp_path).pieces.lower_case


def test_head_tail_cuts_only_texts_over_the_budget_and_counts_every_token(packaged_model_dir):
    """The packaged WordPiece model: a short text as truncation gives it; a long one its head and tail, with
    token_count and truncated saying what the text held."""
    from models.names import TOKEN_COUNT, TRUNCATED

    hf = AutoTokenizer.from_pretrained(packaged_model_dir)
    texts = ["a gem.", " ".join(f"w{i}" for i in range(40))]
    spec = tokenizer_spec(packaged_model_dir)
    ours = InGraphTokenizer(spec, 16, head_share=0.25)(tf.constant(texts))
    plain = InGraphTokenizer(spec, 16)(tf.constant(texts))
    assert ours["input_ids"].numpy()[0].tolist() == plain["input_ids"].numpy()[0].tolist()
    pieces = hf(texts[1], add_special_tokens=False)["input_ids"]
    want = [
        hf.cls_token_id,
        *pieces[:4],
        *pieces[-10:],
        hf.sep_token_id,
    ]  # budget 14: 4 from the head, 10 from the tail
    assert ours["input_ids"].numpy()[1].tolist() == want
    assert ours[TOKEN_COUNT].numpy().tolist() == plain[TOKEN_COUNT].numpy().tolist() == [3, len(pieces)]
    assert ours[TRUNCATED].numpy().tolist() == [False, True]

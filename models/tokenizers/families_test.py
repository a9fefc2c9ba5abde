"""Every tokenizer family gives transformers' own ids, masks and token types, id for id, single texts and pairs.

Models are built offline (tests/model_families.py): tokenizers trained on the packaged corpus plus a
multilingual sample, saved by each family's transformers tokenizer class. The reference is the tokenizer
transformers loads by default (`AutoTokenizer`, the fast one), except where SentencePiece's segmentation ties:
there two orders of the same pieces score the same, `tokenizers`' Viterbi keeps one and SentencePiece (and so
transformers' slow tokenizer) the other. The in-graph tokenizer runs SentencePiece, so those rows may differ
from the fast tokenizer, only as a reordering of the same pieces (the same total score), at most two rows.
"""

import functools
import json

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from models.tokenizers.tokenizer import (
    BYTE_FALLBACK_BPE,
    BYTE_LEVEL_BPE,
    SENTENCEPIECE,
    WORDPIECE,
    InGraphTokenizer,
    tokenizer_spec,
)
from tests.model_families import EDGE_CASES, MULTILINGUAL, TOKENIZER_FAMILIES, fuzz_text, with_special_tokens

FUZZ_TEXT = fuzz_text()

FAMILY_OF = {
    "roberta": BYTE_LEVEL_BPE,
    "xlm-roberta": SENTENCEPIECE,
    "albert": SENTENCEPIECE,
    "deberta-v2": SENTENCEPIECE,
    "mpnet": WORDPIECE,
    "funnel": WORDPIECE,
    "gemma": BYTE_FALLBACK_BPE,
    "llama-3": BYTE_LEVEL_BPE,
    "digits": BYTE_LEVEL_BPE,
}
WHITESPACE_CASES = ["a  b", "a \n b", " lead", "trail ", "x\n\ny", "  ", " . ", "x\u200b", "x \x00", "don't 's  'll"]


@pytest.fixture(scope="module")
def texts(review_texts):
    return review_texts + EDGE_CASES + MULTILINGUAL + WHITESPACE_CASES


@pytest.fixture(scope="module", params=TOKENIZER_FAMILIES)
def family(request, family_model_dir):
    directory = family_model_dir(request.param)
    return request.param, directory, tokenizer_spec(directory), AutoTokenizer.from_pretrained(directory)


def _ties(ours: np.ndarray, theirs: np.ndarray, rows) -> list[int]:
    """Rows holding the same ids in another order: the same pieces, so the same SentencePiece score."""
    return [row for row in rows if sorted(ours[row]) == sorted(theirs[row])]


def _compare(family, texts, max_len, pairs=None, tokenize=None):
    """Ours against HF's, row for row; `tokenize`: ours traced (_traced), where the default runs it eagerly."""
    name, _, spec, hf = family
    tokenize = tokenize or InGraphTokenizer(spec, max_len)
    ours = tokenize(tf.constant(texts)) if pairs is None else tokenize(tf.constant(texts), tf.constant(pairs))
    theirs = hf(texts, pairs, padding="max_length", truncation="longest_first", max_length=max_len)
    keys = ["input_ids", "attention_mask"] + (["token_type_ids"] if "token_type_ids" in hf.model_input_names else [])
    assert set(ours) >= set(keys) and ("token_type_ids" in ours) == ("token_type_ids" in keys)
    differing = set()
    for key in keys:
        actual, expected = ours[key].numpy(), np.array(theirs[key])
        assert actual.shape == (len(texts), max_len)
        differing |= set(np.where((actual != expected).any(axis=1))[0].tolist())
    if differing and spec.family == SENTENCEPIECE:
        ties = _ties(ours["input_ids"].numpy(), np.array(theirs["input_ids"]), sorted(differing))
        assert len(ties) <= 2, f"{name}: {len(ties)} tie rows is more than the corpus held when this was written"
        differing -= set(ties)
    assert not differing, f"{name}: differs for {[texts[i][:60] for i in sorted(differing)[:5]]}"


def test_the_family_is_read_from_the_tokenizer_files(family):
    name, _, spec, _ = family
    assert spec.family == FAMILY_OF[name]


def test_single_text_parity(texts, family):
    _compare(family, texts, 64)


def test_pair_parity_with_longest_first_truncation(texts, family):
    """At 24 tokens most corpus pairs are cut (on either side, or both) and the short ones fit."""
    max_len = 24
    texts = texts[:2000]
    firsts = texts[::2] + MULTILINGUAL + WHITESPACE_CASES
    seconds = texts[1::2][: len(texts[::2])] + MULTILINGUAL[::-1] + WHITESPACE_CASES[::-1]
    _compare(family, firsts, max_len, pairs=seconds)


def test_layouts_are_the_models_own(family_model_dir):
    """RoBERTa/MPNet pairs keep both separators; Funnel's `<cls> a <sep> b <sep>` has no token types in
    transformers 5 (4 gave `<cls>` type 2): as HF gives them."""
    mpnet = InGraphTokenizer(tokenizer_spec(family_model_dir("mpnet")), 12)(tf.constant(["a"]), tf.constant(["b"]))
    hf = AutoTokenizer.from_pretrained(family_model_dir("mpnet"))
    ids = mpnet["input_ids"].numpy()[0].tolist()
    assert ids[:6] == hf("a", "b")["input_ids"] and ids.count(hf.sep_token_id) == 3  # <s> a </s></s> b </s>
    funnel = InGraphTokenizer(tokenizer_spec(family_model_dir("funnel")), 8)(tf.constant(["a"]), tf.constant(["b"]))
    hf = AutoTokenizer.from_pretrained(family_model_dir("funnel"))
    assert funnel["input_ids"].numpy()[0].tolist()[:5] == hf("a", "b")["input_ids"]
    assert ("token_type_ids" in funnel) == ("token_type_ids" in hf("a", "b"))


@pytest.fixture(scope="module", params=["Metaspace", "LlamaTokenizer", "GemmaTokenizer"])
def bpe_from_sentencepiece(request, tmp_path_factory):
    """BPE tokenizer.json files as SentencePiece BPE models become them, without the .model: `tokenizers`' own
    SentencePieceBPETokenizer (Metaspace, split at each U+2581, no byte fallback), and a byte-fallback model
    converted by transformers 5's LlamaTokenizer and GemmaTokenizer."""
    import transformers
    from tokenizers import SentencePieceBPETokenizer

    from tests.model_families import _sentencepiece, training_texts

    directory = tmp_path_factory.mktemp(request.param)
    if request.param == "Metaspace":
        bpe = SentencePieceBPETokenizer()
        bpe.train_from_iterator(training_texts()[:2000], vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"])
        tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>", pad_token="</s>")
    else:
        options = {"model_type": "bpe", "byte_fallback": True, "split_digits": True}
        (directory / "tokenizer.model").write_bytes(_sentencepiece(training_texts()[:3000], **options))
        tokenizer = getattr(transformers, request.param).from_pretrained(
            directory, padding_side="right", pad_token="</s>"
        )
        (directory / "tokenizer.model").unlink()
    tokenizer.save_pretrained(directory)
    assert not list(directory.glob("*.model"))
    return request.param, directory, tokenizer_spec(directory), AutoTokenizer.from_pretrained(directory)


def test_bpe_from_sentencepiece_runs_from_tokenizer_json_alone(texts, bpe_from_sentencepiece):
    """Its merges are in tokenizer.json: no .model needed, singles and pairs id for id."""
    _, _, spec, _ = bpe_from_sentencepiece
    assert spec.family == BYTE_FALLBACK_BPE and spec.folder_files == ()
    _compare(bpe_from_sentencepiece, texts[:1500], 64)
    _compare(bpe_from_sentencepiece, texts[:600:2] + MULTILINGUAL, 24, pairs=texts[1:600:2] + MULTILINGUAL[::-1])


def test_a_sentencepiece_folder_without_tokenizer_json_is_converted(texts, family_model_dir, tmp_path):
    """The slow tokenizer's files alone (the .model file): transformers converts them; same ids."""
    import shutil

    copy = shutil.copytree(family_model_dir("albert"), tmp_path / "model")
    (copy / "tokenizer.json").unlink()
    texts = texts[:300]
    ours = InGraphTokenizer(tokenizer_spec(copy), 32)(tf.constant(texts))["input_ids"].numpy()
    hf = AutoTokenizer.from_pretrained(family_model_dir("albert"))
    np.testing.assert_array_equal(
        ours, np.array(hf(texts, padding="max_length", truncation=True, max_length=32)["input_ids"])
    )


def _with_punctuation_split(declared):
    declared["pre_tokenizer"]["pretokenizers"].insert(0, {"type": "Punctuation", "behavior": "Isolated"})


def _with_nfkc(declared):
    declared["normalizer"] = {"type": "NFKC"}


def _without_clean_text(declared):
    declared["normalizer"]["clean_text"] = False


def _with_lowercase(declared):
    declared["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Lowercase"}, declared["normalizer"]]}


def _with_gpt2_split_after_llama3s(declared):
    declared["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = True


def _with_metaspace_inside_a_word(declared):
    vocab = declared["model"]["vocab"]
    vocab["a\u2581b"] = max(vocab.values()) + 1


@pytest.mark.parametrize(
    ("family", "change", "message"),
    [
        (
            "deberta-v2",
            _with_punctuation_split,
            r"SentencePiece tokenizer .* pre-tokenizer \['Punctuation', 'Metaspace'\]",
        ),
        ("roberta", _with_nfkc, r"byte-level BPE tokenizer .* has normalizer NFKC before ByteLevel"),
        ("mpnet", _without_clean_text, r"WordPiece tokenizer .* BertNormalizer clean_text=false"),
        ("gemma", _with_lowercase, r"BPE with byte fallback tokenizer .* normalizer \['Lowercase', 'Replace'\]"),
        ("gemma", _with_metaspace_inside_a_word, r"vocab entries with U\+2581 after another character \(\['a▁b'\]\)"),
        ("llama-3", _with_gpt2_split_after_llama3s, r"pre-tokenizer \['Split', 'ByteLevel'\] without GPT-2's split"),
    ],
)
def test_declared_steps_outside_the_families_are_refused(family_model_dir, tmp_path, family, change, message):
    import shutil

    from models.tokenizers.tokenizer import UnsupportedTokenizerError

    copy = shutil.copytree(family_model_dir(family), tmp_path / "model")
    declared = json.loads((copy / "tokenizer.json").read_text())
    change(declared)
    (copy / "tokenizer.json").write_text(json.dumps(declared))
    # transformers 5 builds a model's own tokenizer class from its vocab; the generic class runs tokenizer.json as
    # declared (what a folder with custom steps declares)
    settings = json.loads((copy / "tokenizer_config.json").read_text())
    (copy / "tokenizer_config.json").write_text(json.dumps({**settings, "tokenizer_class": "TokenizersBackend"}))
    with pytest.raises(UnsupportedTokenizerError, match=message):
        tokenizer_spec(copy)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(pairs=st.lists(st.tuples(FUZZ_TEXT, FUZZ_TEXT), min_size=1, max_size=6))
@example(pairs=[("\U000105e5'll", "a\u1c89 b")])  # letters to tokenizers' Unicode tables, not yet to RE2's
@example(pairs=[("nul\x00'll", "  'll \x00")])
@example(pairs=[("x\n\nb 'S \t(a \u017f'\u017f", ".,\r\nx  1234567 ")])  # the GPT-4 split's newline and number rules
@pytest.mark.parametrize("name", ["roberta", "gemma", "llama-3", "digits"])
def test_fuzzed_text_gets_bpe_ids(family_model_dir, name, pairs):
    """Random text of every Unicode category: each BPE family gives HF's ids, singles and pairs, whatever the
    characters (models/tokenizers/gpt2_classes.py holds tokenizers' own classes, newer than RE2's)."""
    directory = family_model_dir(name)
    family = (name, directory, tokenizer_spec(directory), _hf_tokenizer(directory))
    firsts, seconds = [a for a, _ in pairs], [b for _, b in pairs]
    _compare(family, firsts, 24, tokenize=_traced(directory, 24, paired=False))
    _compare(family, firsts, 24, pairs=seconds, tokenize=_traced(directory, 24, paired=True))


@functools.cache
def _hf_tokenizer(directory):
    return AutoTokenizer.from_pretrained(directory)


@functools.cache
def _traced(directory, max_len: int, paired: bool):
    """The in-graph tokenizer traced once for texts of any count, as serving runs it: the fuzzer's ~160 calls a family
    take 0.2 s each eagerly (each op dispatched from Python) and about a millisecond in the graph."""
    texts = tf.TensorSpec([None], tf.string)
    return tf.function(InGraphTokenizer(tokenizer_spec(directory), max_len), input_signature=[texts] * (1 + paired))


def test_head_tail_keeps_the_model_tokenizers_own_pieces_from_both_ends(texts, family, head_share=0.3):
    """model.long_texts: head_tail. The reference: HF's own pieces of the whole text, the first
    round(budget x head_share) and the last of the rest, between the model's own special tokens."""
    name, _, spec, hf = family
    max_len, texts = 24, texts[:1500]
    budget = max_len - spec.layout.special_count(False)
    head = round(budget * head_share)
    ours = InGraphTokenizer(spec, max_len, head_share=head_share)(tf.constant(texts))["input_ids"].numpy()
    expected = []
    for pieces in hf(texts, add_special_tokens=False)["input_ids"]:
        kept = pieces if len(pieces) <= budget else pieces[:head] + pieces[len(pieces) - (budget - head) :]
        ids = with_special_tokens(hf, kept)
        expected.append(ids + [hf.pad_token_id] * (max_len - len(ids)))
    differing = sorted(set(np.where((ours != np.array(expected)).any(axis=1))[0].tolist()))
    if spec.family == SENTENCEPIECE:
        differing = [row for row in differing if row not in _ties(ours, np.array(expected), differing)]
    assert not differing, f"{name}: differs for {[texts[i][:60] for i in differing[:5]]}"
    assert sum(len(p) > budget for p in hf(texts, add_special_tokens=False)["input_ids"]) > 100  # most are cut


def test_windows_are_the_model_tokenizers_own_overflowing_windows(texts, family, stride=0.5, count=6):
    """model.long_texts: windows. The reference: HF's own `return_overflowing_tokens` with the overlap as its
    `stride`, each document's first `count` windows; ours beyond a document's windows are masked out."""
    name, _, spec, hf = family
    max_len, corpus = 24, texts[:600]
    documents = [" ".join(corpus[i : i + 4]) for i in range(0, len(corpus), 4)]
    budget = max_len - spec.layout.special_count(False)
    step = int(budget * stride)
    ours = InGraphTokenizer(spec, max_len, windows=(stride, count))(tf.constant(documents))
    ids, mask = ours["input_ids"].numpy().reshape(len(documents), count, max_len), ours["window_mask"].numpy()
    theirs = hf(
        documents, truncation=True, max_length=max_len, stride=budget - step, return_overflowing_tokens=True,
        padding="max_length",
    )  # fmt: skip
    expected = [[] for _ in documents]
    for row, document in zip(theirs["input_ids"], theirs["overflow_to_sample_mapping"], strict=True):
        expected[document].append(row)
    assert [int(m.sum()) for m in mask] == [min(count, len(windows)) for windows in expected]
    ours_rows = np.concatenate([ids[i][mask[i] > 0] for i in range(len(documents))])
    their_rows = np.array([row for windows in expected for row in windows[:count]])
    differing = set(np.where((ours_rows != their_rows).any(axis=1))[0].tolist())
    if spec.family == SENTENCEPIECE:  # a tie of SentencePiece scores (see _compare) shows in each window holding it
        differing -= set(_ties(ours_rows, their_rows, sorted(differing)))
    assert not differing, f"{name}: {len(differing)} windows differ"
    assert (
        sum(len(w) > 2 for w in expected) > 50 and sum(len(w) > count for w in expected) > 5
    )  # many windows, some cut


@pytest.fixture(scope="module", params=["xlm-roberta", "albert", "deberta-v2"])
def saved_by_transformers_5(request, family_model_dir, tmp_path_factory):
    """A SentencePiece family's tokenizer as transformers 5 saves it: tokenizer.json and tokenizer_config.json,
    no .model (every SentencePiece model fine-tuned and saved since transformers 5 arrives so)."""
    saved = tmp_path_factory.mktemp(f"{request.param}-saved")
    AutoTokenizer.from_pretrained(family_model_dir(request.param)).save_pretrained(saved)
    assert not list(saved.glob("*.model"))
    return request.param, saved, tokenizer_spec(saved), AutoTokenizer.from_pretrained(saved)


def test_tokenizer_json_alone_gives_transformers_5s_ids(texts, saved_by_transformers_5):
    """The Unigram pieces, scores and precompiled charsmap of tokenizer.json rebuilt into the model SentencePiece's
    op runs: single texts and pairs, id for id (ties as above), and nothing of it for an export to copy."""
    _, _, spec, _ = saved_by_transformers_5
    assert spec.family == SENTENCEPIECE and not spec.pieces.in_folder and spec.folder_files == ()
    _compare(saved_by_transformers_5, texts, 64)
    firsts, seconds = texts[:1000:2] + MULTILINGUAL, texts[1:1000:2] + MULTILINGUAL[::-1]
    _compare(saved_by_transformers_5, firsts, 24, pairs=seconds)


def test_tokenizer_json_alone_matches_the_model_file_it_was_saved_from(family_model_dir, saved_by_transformers_5):
    """The rebuilt model segments as the folder's own .model does."""
    name, _, rebuilt, _ = saved_by_transformers_5
    original = tokenizer_spec(family_model_dir(name))
    sample = MULTILINGUAL + EDGE_CASES
    ours = InGraphTokenizer(rebuilt, 64)(tf.constant(sample))["input_ids"].numpy()
    np.testing.assert_array_equal(ours, InGraphTokenizer(original, 64)(tf.constant(sample))["input_ids"].numpy())


def _with_another_score(copy):
    declared = json.loads((copy / "tokenizer.json").read_text())
    declared["model"]["vocab"][100][1] += 5.0
    (copy / "tokenizer.json").write_text(json.dumps(declared))


def _with_a_token_more_in_vocab_txt(copy):
    with (copy / "vocab.txt").open("a", encoding="utf-8") as vocab:
        vocab.write("extra\n")


@pytest.mark.parametrize(
    ("family", "change", "message"),
    [
        ("xlm-roberta", _with_another_score, r"sentencepiece.bpe.model differs .* in 1 pieces or their scores \(first"),
        ("mpnet", _with_a_token_more_in_vocab_txt, r"vocab.txt \([\d,]+ tokens\) differs from the vocab of tokenizer"),
    ],
)
def test_vocabulary_files_that_disagree_with_tokenizer_json_are_named(
    family_model_dir, tmp_path, family, change, message
):
    """The .model and vocab.txt stay read where present, and must say what tokenizer.json (transformers') says."""
    import shutil

    from models.hub.pretrained import ModelFilesError

    copy = shutil.copytree(family_model_dir(family), tmp_path / "model")
    change(copy)
    with pytest.raises(ModelFilesError, match=message):
        tokenizer_spec(copy)


@pytest.mark.parametrize("name", ["mpnet", "roberta", "gemma", "llama-3"])
def test_every_bpe_and_wordpiece_family_runs_from_what_transformers_5_saves(texts, family_model_dir, tmp_path, name):
    """WordPiece and the BPE families as transformers 5's save_pretrained leaves them (tokenizer.json, no vocab.txt,
    vocab.json or merges.txt): singles and pairs id for id (the SentencePiece ones: saved_by_transformers_5 above)."""
    AutoTokenizer.from_pretrained(family_model_dir(name)).save_pretrained(tmp_path)
    assert not {"vocab.txt", "vocab.json", "merges.txt"} & {p.name for p in tmp_path.iterdir()}
    family = (name, tmp_path, tokenizer_spec(tmp_path), AutoTokenizer.from_pretrained(tmp_path))
    _compare(family, texts[:1500], 64)
    _compare(family, texts[:600:2] + MULTILINGUAL, 24, pairs=texts[1:600:2] + MULTILINGUAL[::-1])

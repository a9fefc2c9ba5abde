"""The HF export's PyTorch-layout model.safetensors, read back by transformers 5 + PyTorch for every
architecture the pipeline fine-tunes (WordPiece BERT, byte-level BPE RoBERTa, SentencePiece XLM-R / ALBERT /
DeBERTa-v3, MPNet; all of them with --slow), and its names and shapes against a checkpoint PyTorch itself
wrote (the packaged MiniLM's)."""

import json

import numpy as np
import pytest
import tensorflow as tf
from safetensors import safe_open
from safetensors.numpy import load_file

from models.encoders.classifier import torch_state
from models.encoders.from_folder import build_classifier, read_model_folder
from models.serving.hf_export import PT_WEIGHTS, save_hf_format
from models.serving.signatures import model_logits
from tests.model_families import FAMILIES

LABELS = ["rotten", "fresh", "mixed"]


def _exported(model_dir, destination):
    """A classifier of the model in model_dir with a head that is not zero, exported as the Trainer exports."""
    model, _ = build_classifier(read_model_folder(model_dir), LABELS)
    ids = tf.constant([[2, 7, 11, 5, 3, 0], [2, 9, 3, 0, 0, 0]])
    inputs = {"input_ids": ids, "attention_mask": tf.cast(ids > 0, tf.int32)}
    names = save_hf_format(model, model_dir, 32, str(destination))
    return model, inputs, names


def _read_back_by_transformers(folder, inputs) -> np.ndarray:
    """transformers 5 + PyTorch loading the export (AutoModelForSequenceClassification, the reference environment):
    its logits on `inputs`, no weight missing, unused or of another shape."""
    from tests import torch_reference_env as reference

    (logits,) = reference.logits([(folder, {k: v.numpy().tolist() for k, v in inputs.items()})])
    return np.array(logits)


# Our BERT encoder in every run; the other families with --slow (~15 s each, for CI's time; ModernBERT's export is
# read back in tests/modernbert_e2e_test.py)
TOKENIZER_KINDS = ("bert",)


@pytest.mark.parametrize(
    "family",
    [*TOKENIZER_KINDS, *(pytest.param(f, marks=pytest.mark.slow) for f in FAMILIES if f not in TOKENIZER_KINDS)],
)
def test_pytorch_weights_load_in_transformers_with_no_key_missing_and_the_same_logits(
    family, tmp_path, tiny_bert_dir, family_model_dir
):
    model_dir = tiny_bert_dir if family == "bert" else family_model_dir(family)
    model, inputs, names = _exported(model_dir, tmp_path / "export")
    # no tf_model.h5: no TensorFlow class of transformers computes our encoders
    assert {PT_WEIGHTS, "config.json"} <= set(names)
    assert "tf_model.h5" not in names
    with safe_open(str(tmp_path / "export" / PT_WEIGHTS), framework="np") as archive:
        assert archive.metadata() == {"format": "pt"}  # transformers loads `pt` files as PyTorch state dicts

    expected = model_logits(model, inputs).numpy()
    np.testing.assert_allclose(_read_back_by_transformers(tmp_path / "export", inputs), expected, rtol=1e-5, atol=1e-5)


def test_names_and_shapes_are_those_pytorch_wrote_for_the_same_architecture(packaged_model_dir):
    """The packaged MiniLM's model.safetensors was written by PyTorch (BertModel: no `bert.` prefix). The classifier
    built from it exports exactly its tensors under the task model's prefix, in its shapes, plus the new head."""
    model, _ = build_classifier(read_model_folder(packaged_model_dir), LABELS)
    written_by_pytorch = load_file(str(packaged_model_dir / PT_WEIGHTS))
    written_by_pytorch.pop("embeddings.position_ids")  # a buffer older PyTorch BERTs saved; not a weight

    exported = torch_state(model)

    head = {"classifier.weight": (len(LABELS), 384), "classifier.bias": (len(LABELS),)}
    expected = {f"bert.{name}": value.shape for name, value in written_by_pytorch.items()} | head
    assert {name: value.shape for name, value in exported.items()} == expected
    # Linear weights are [out, in] in PyTorch: the values are the checkpoint's own, not only their shapes
    query = "encoder.layer.3.attention.self.query.weight"
    np.testing.assert_array_equal(exported[f"bert.{query}"], written_by_pytorch[query])


@pytest.mark.parametrize(
    "family", ["bert", *(pytest.param(f, marks=pytest.mark.slow) for f in ("roberta", "albert", "mpnet"))]
)
def test_a_mean_pooling_head_exports_in_the_sentence_transformers_layout_with_the_same_logits(
    family, tmp_path, tiny_bert_dir, family_model_dir
):
    """BERT's family pooling the mean: no transformers class computes it, so sentence-transformers reads the export
    (encoder, mean pooling, the head's two dense layers) and answers our logits; config.json names the bare encoder,
    which transformers loads with nothing missing or unused (AutoModelForSequenceClassification would give it a
    fresh head, never first-token logits of a model that did not train on them)."""
    from tests import torch_reference_env as reference

    model_dir = tiny_bert_dir if family == "bert" else family_model_dir(family)
    model, _ = build_classifier(read_model_folder(model_dir, pooling="mean"), LABELS)
    ids = tf.constant([[2, 7, 11, 5, 3, 0], [2, 9, 3, 0, 0, 0]])
    inputs = {"input_ids": ids, "attention_mask": tf.cast(ids > 0, tf.int32)}
    names = save_hf_format(model, model_dir, 32, str(tmp_path / "export"))

    assert {"modules.json", "1_Pooling", "2_Dense", "3_Dense", "sentence_bert_config.json"} <= set(names)
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["architectures"][0].endswith("Model") and config["classifier_pooling"] == "mean"
    batch = {k: v.numpy().tolist() for k, v in inputs.items()}
    (answer,) = reference.sentence_logits([(tmp_path / "export", batch, ["a gem.", "dull, flat and far too long."])])
    expected = model_logits(model, inputs).numpy()
    np.testing.assert_allclose(np.array(answer["logits"]), expected, rtol=1e-5, atol=1e-5)
    assert np.array(answer["encoded"]).shape == (2, len(LABELS))
    # first-token logits from the same weights differ: the test would see an export that pooled the first token
    first = build_classifier(read_model_folder(model_dir, pooling="first"), LABELS)[0]
    first.set_weights(model.get_weights())
    assert not np.allclose(model_logits(first, inputs).numpy(), expected, atol=1e-3)


def test_a_warm_start_from_the_sentence_transformers_export_reads_its_head_back(tmp_path, tiny_bert_dir):
    """The retraining path: the blessed model's export, read as a model folder (auto: its 1_Pooling says mean), builds
    the classifier it was, head included (from 2_Dense and 3_Dense), nothing new."""
    model, inputs, _ = _exported_pooling(tiny_bert_dir, tmp_path / "export", "mean")
    folder = read_model_folder(tmp_path / "export")
    again, report = build_classifier(folder, LABELS)
    assert folder.pooling.pooling == "mean" and "1_Pooling" in folder.pooling.reason
    assert report.missing == ()
    np.testing.assert_allclose(model_logits(again, inputs).numpy(), model_logits(model, inputs).numpy(), atol=1e-6)


def _exported_pooling(model_dir, destination, pooling):
    model, _ = build_classifier(read_model_folder(model_dir, pooling=pooling), LABELS)
    head = model.head.out
    head.bias.assign(np.arange(len(LABELS), dtype=np.float32) * 0.3)  # a head that is not the fresh one
    ids = tf.constant([[2, 7, 11, 5, 3, 0], [2, 9, 3, 0, 0, 0]])
    inputs = {"input_ids": ids, "attention_mask": tf.cast(ids > 0, tf.int32)}
    save_hf_format(model, model_dir, 32, str(destination))
    return model, inputs, destination

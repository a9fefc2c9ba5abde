"""A retraining loop on the user's own segments, under LocalDagRunner with the tiny BERT: three span retrains in one
pipeline root on data with a `language` column, judged on a fixed golden test file.

1. span 1: the first run, from the pretrained checkpoint, blessed; TFMA slices by language.
2. span 2: a span retrain (training.warm_start: auto) starts from span 1's blessed model: TFX's base_model input in
   ML Metadata, the training record, the summary and the card say so; half the learning rate, a third of the epochs.
3. span 3: its "de" rows' labels shuffled, trained cold: the model reads English as before and German not at all.
   The whole split's AUC stays within what the gate allows; the German slice's change lies beyond its paired
   interval and refuses the blessing, named; the small "fr" slice is reported and not gated.

The loop runs with model.pooling: mean, the head on the mean of the tokens, which no BertForSequenceClassification
computes: each blessed model is exported in the sentence-transformers layout, and the warm start reads its head back
from there (2_Dense, 3_Dense).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ml_metadata.proto import metadata_store_pb2

from components.publisher.model_card import parse_card
from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from pipeline.reporting.metadata_reader import node_name, open_store
from pipeline.reporting.report import build_report
from tests import torch_reference_env as reference
from tests.hf_export_check import BUCKET_TEXTS, serving_probabilities
from tests.span_data import language_reviews, write_language_csv
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e

TRAIN = {"en": 330, "de": 150, "fr": 20}  # per span; eval is carved from it
GOLDEN = {"en": 240, "de": 100, "fr": 30}


def config_for(workdir: Path, model_dir: Path, intervals: str = "auto", **training):
    data = workdir / "data"
    overrides = tiny_overrides(workdir, model_dir, 32, max_auc_regression=0.1, confidence_intervals=intervals)
    # One length slice instead of three: each slice costs the Evaluator's intervals about 7 s per model.
    overrides["evaluation"].update(
        slice_columns=["language"], min_slice_examples=50, slice_thresholds={"language": 0.05}, length_slice_edges=[999]
    )
    return pipeline_config.load_config(
        overrides={
            **overrides,
            "training.epochs": "auto",
            "model.pooling": "mean",
            "dataset.name": "csv",
            "dataset.split_files": {"train": [str(data / "span-{SPAN}" / "*.csv")], "test": [str(data / "golden.csv")]},
            "dataset.ready_marker": "_SUCCESS",
            **{f"training.{k}": v for k, v in training.items()},
        }
    )


def write_span(workdir: Path, span: int, **shuffled) -> None:
    folder = workdir / "data" / f"span-{span}"
    write_language_csv(folder / "part-0.csv", language_reviews(TRAIN, seed=span, **shuffled))
    (folder / "_SUCCESS").write_text("")


@pytest.fixture(scope="module")
def retrains(tmp_path_factory, tiny_bert_dir):
    workdir = tmp_path_factory.mktemp("segments")
    write_language_csv(workdir / "data" / "golden.csv", language_reviews(GOLDEN, seed=100))
    write_span(workdir, 1)
    first = run_local(config_for(workdir, tiny_bert_dir))
    write_span(workdir, 2)
    # Point comparisons suffice for two near-perfect models; the intervals of nine slices cost the Evaluator a minute.
    warm = run_local(config_for(workdir, tiny_bert_dir, intervals="never"))
    write_span(workdir, 3, shuffled=("de",))
    config = config_for(workdir, tiny_bert_dir, warm_start="never")
    german_lost = run_local(config)
    return config, first, warm, german_lost


def test_the_first_run_starts_cold_and_tfma_slices_by_language(retrains):
    _, first, _, _ = retrains
    assert first.blessed is True and first.baseline_uri is None
    assert not first.training.warm and first.training.start_reason.endswith("the first run, or data without spans")
    assert {"language=en", "language=de", "language=fr"} <= set(first.slices)
    assert first.slices["language=de"]["example_count"] == GOLDEN["de"]
    assert first.slices["language=de"]["auc"] > 0.9  # it learnt the German words too


def test_a_span_retrain_starts_from_the_blessed_model_as_ml_metadata_records(retrains):
    config, first, warm, _ = retrains
    assert warm.training.warm and warm.baseline_uri is not None
    assert warm.training.started_from.startswith(warm.baseline_uri)
    assert warm.training.learning_rate == pytest.approx(first.training.learning_rate / 2)
    assert warm.training.epochs == -(-first.training.epochs // 3) and "a warm start" in warm.training.epochs_reason
    assert "  started from  the blessed model " in warm.render()
    # the summary's recipe is the Trainer's: the halved rate, and why, not the preflight's cold one
    halved = f"learning rate {warm.training.learning_rate:g}, "
    assert warm.recipe.startswith(halved) and "halved from the cold recipe's" in warm.recipe
    assert f"  recipe        {halved}" in warm.render()
    assert first.recipe.startswith(f"learning rate {first.training.learning_rate:g}, ")
    store = open_store(config.metadata_sqlite)
    trainers = [e for e in store.get_executions() if node_name(store, e, config.pipeline_name) == "Trainer"]
    inputs = [
        [a for a in store.get_artifacts_by_id([e.artifact_id]) if a.type == "Model"]
        for e in store.get_events_by_execution_ids([trainers[1].id])
        if e.type == metadata_store_pb2.Event.INPUT
    ]
    (base_model,) = [a for found in inputs for a in found]
    assert base_model.uri == warm.baseline_uri  # the chain: span 2's model started from span 1's
    card = parse_card((Path(warm.hf_model_dir) / "README.md").read_text())
    assert f"started from {warm.training.started_from}" in card.text
    assert f"learning rate {warm.training.learning_rate}," in card.text


def test_a_mean_pooling_loop_exports_for_sentence_transformers_and_says_so(retrains):
    _, first, warm, _ = retrains
    for summary in (first, warm):
        assert summary.training.pooling == "the head reads the mean of the tokens (as configured)"
        assert f"  pooling       {summary.training.pooling}" in summary.render()
    export = Path(warm.hf_model_dir)
    assert {"modules.json", "1_Pooling", "2_Dense", "3_Dense"} <= {p.name for p in export.iterdir()}
    # a sentence-transformers user's answers (encode: the logits) are the SavedModel's, texts past 32 tokens included
    (answer,) = reference.sentence_logits([(export, None, BUCKET_TEXTS)])
    encoded = np.array(answer["encoded"])
    user = np.exp(encoded) / np.exp(encoded).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(user, serving_probabilities(warm.pushed_dir, BUCKET_TEXTS), atol=1e-4)
    assert json.loads((export / "config.json").read_text())["architectures"] == ["BertModel"]
    card = parse_card((export / "README.md").read_text())
    assert card.data.library_name == "sentence-transformers" and "SentenceTransformer(" in card.text
    assert "pooling the head reads the mean of the tokens" in card.text


def test_a_retrain_worse_on_one_language_is_refused_naming_that_slice(retrains, tmp_path):
    config, _, _, german_lost = retrains
    assert german_lost.blessed is False and german_lost.pushed_version is None
    assert not german_lost.training.warm and german_lost.training.start_reason == "training.warm_start: never"
    _, _, high = german_lost.changes["auc"]
    assert high >= -0.1  # the whole split alone is within the allowed loss: it would be blessed
    reason = german_lost.blessing_reason
    assert reason.startswith("auc change vs. the blessed baseline -0.") and reason.endswith("on slice language=de")
    assert "95% interval [" in reason and "worse than the allowed -0.05" in reason
    (refused,) = german_lost.deciding_slices()
    assert refused.startswith("language=de auc -0.")
    assert german_lost.ungated_slices == {"language=fr": "30 test examples, fewer than the 50 a gated slice needs"}
    rendered = german_lost.render()
    assert "  refused on    language=de auc -0." in rendered and "not gated: 30 test examples" in rendered
    page = build_report(config.metadata_sqlite, config.pipeline_name, tmp_path / "report.html").read_text()
    assert "Per slice against the blessed baseline" in page and "refused the blessing" in page
    slices_json = json.dumps(german_lost.to_json()["slice_verdicts"])
    assert '"slice": "language=de"' in slices_json

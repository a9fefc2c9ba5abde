"""Training controls end to end under LocalDagRunner with the tiny BERT, on imbalanced data (3 fresh : 1 rotten):
balanced class weights from the train split's counts, early stopping that stops before the last epoch and
exports the best one, per-class recall and macro F1 in the Evaluator, and the macro-F1 gate."""

import csv

import pytest

from models.training.epochs import MAX_AUTO_EPOCHS
from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from tests import user_datasets
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e


def write_imbalanced_csv(path, fresh: int = 300, rotten: int = 100):
    rows = [r for r in user_datasets.corpus().to_list() if r["text"] and r["category"] in ("fresh", "rotten")]
    chosen = [r for r in rows if r["category"] == "fresh"][:fresh] + [r for r in rows if r["category"] == "rotten"][
        :rotten
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows([r["text"], r["category"]] for r in chosen)
    return path


def config_for(workdir, model_dir, csv_path, **evaluation):
    overrides = {
        **tiny_overrides(workdir, model_dir, 32, **evaluation),
        "dataset.name": str(csv_path),
        # The defaults: epochs auto (a few hundred rows: the most auto chooses) and early stopping's patience auto
        # (3: a quarter of 10 epochs).
        "training.epochs": "auto",
        "training.class_weights": "balanced",
        # min_delta 10 makes every epoch after the first "no improvement": patience 3 stops after epoch 4.
        "training.early_stopping": {"min_delta": 10.0, "metric": "val_loss"},
        "training.packing": "auto",
    }
    return pipeline_config.load_config(overrides=overrides)


@pytest.fixture(scope="module")
def controls_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("controls")


@pytest.fixture(scope="module")
def runs(controls_dir, tiny_bert_dir):
    workdir = controls_dir
    csv_path = write_imbalanced_csv(workdir / "data" / "imbalanced.csv")
    gated = run_local(config_for(workdir, tiny_bert_dir, csv_path, min_macro_f1=0.0))
    # the first model is its baseline; the macro-F1 bound is the point, not intervals (20 s of jackknife)
    impossible = run_local(config_for(workdir, tiny_bert_dir, csv_path, min_macro_f1=1.0, confidence_intervals="never"))
    return gated, impossible


def test_balanced_class_weights_come_from_the_train_split_counts(runs):
    summary, _ = runs
    counts = summary.label_counts["train"]
    assert counts["fresh"] > 2 * counts["rotten"]
    total = sum(counts.values())
    expected = {label: total / (2 * n) for label, n in counts.items()}
    assert summary.training.class_weights == pytest.approx(expected)
    assert summary.training.class_weights["rotten"] > 1 > summary.training.class_weights["fresh"]
    assert "class weights balanced: " in summary.render()


def test_auto_packing_leaves_rows_of_cut_texts_unpacked_and_says_why(runs):
    """Width 32 cuts 29% of these texts: packed rows would save under 5% of the tokens, so auto does not pack."""
    summary, _ = runs
    assert "packing off (auto: it would save under 5% of the tokens)" in summary.render()
    assert summary.throughput["padding_share_one_per_row"] is None


def test_auto_epochs_are_a_maximum_early_stopping_ends_and_exports_the_best(runs):
    summary, _ = runs
    record = summary.training
    assert (record.epochs, record.best_epoch, record.stopped_early) == (MAX_AUTO_EPOCHS, 1, True)
    # patience 3 after epoch 1, plus the epochs whose training loss was still at the prior's (best_epoch.py)
    assert record.epochs_run == 4 + record.held
    train = summary.label_counts["train"]
    assert record.epochs_reason == f"auto: {sum(train.values()):,} train examples: 10 passes, the most auto chooses"
    held = f"; not counted against patience: {record.held} with the training loss still at the prior's"
    held = held if record.held else ""
    assert (
        f"stopped after epoch {record.epochs_run}, at most {MAX_AUTO_EPOCHS} (auto: " in summary.render()
        and f"val_loss did not improve by more than 10 for 3 epoch(s){held}" in summary.render()
    )


def test_an_epoch_more_accurate_than_the_one_val_loss_exported_is_named(runs, controls_dir):
    """val_loss exported epoch 1 (min_delta 10); the summary names the epoch whose val_accuracy beat it by more than
    the eval split's noise, from the same history the Trainer's TensorBoard logs hold."""
    from models.training.exported_epoch import more_accurate_epoch
    from pipeline.reporting.report import training_series

    summary, _ = runs
    (model_run,) = (controls_dir / "pipeline" / "Trainer" / "model_run").iterdir()  # the second run's is cached
    curves = training_series(str(model_run))
    accuracies, losses = (dict(curves[f"validation/epoch_{metric}"]) for metric in ("accuracy", "loss"))
    eval_examples = sum(summary.label_counts["eval"].values())
    named = more_accurate_epoch(accuracies, summary.training.best_epoch - 1, eval_examples, losses)
    # balanced class weights turn epoch 1 to the rarer label (val_accuracy ~0.14 here), later epochs to ~0.7-0.9
    assert named.startswith("val_accuracy was best at epoch ") and summary.training.more_accurate == named
    assert f"  most accurate {named}" in summary.render()


def test_the_evaluator_reports_per_class_recall_and_macro_f1(runs):
    summary, _ = runs
    assert summary.blessed is True
    assert 0 <= summary.metrics["macro_f1"] <= 1
    assert set(summary.per_class) == {"fresh", "rotten"}
    for values in summary.per_class.values():
        assert {"precision", "recall", "f1"} <= set(values)
    mean_f1 = sum(v["f1"] for v in summary.per_class.values()) / 2
    assert summary.metrics["macro_f1"] == pytest.approx(mean_f1)


def test_the_macro_f1_gate_refuses_a_model_below_it(runs):
    _, summary = runs
    assert summary.components[-1].state == "done"
    assert [c.state for c in summary.components if c.name == "Trainer"] == ["cached"]
    assert summary.blessed is False and not summary.pushed_dir
    assert "macro_f1" in summary.blessing_reason and "needs >= 1" in summary.blessing_reason


def test_a_run_on_labels_random_for_their_texts_says_it_did_not_leave_chance(tmp_path, tiny_bert_dir, capsys):
    """Nothing to learn: each review's label drawn at random. The run ends as any other (exit 0; the gate at 0
    blesses it), and the Trainer's line and the summary say that the model did not leave chance, with what to try."""
    import random

    from pipeline.cli import main

    rows = [r["text"] for r in user_datasets.corpus().to_list() if r["text"]][:320]
    draw = random.Random(0)
    path = tmp_path / "random.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["text", "label"], *([text, draw.choice(["a", "b"])] for text in rows)])
    args = [
        "run", "--model", str(tiny_bert_dir), "--dataset", str(path), "--pipeline-root", str(tmp_path / "root"),
        "--serving-dir", str(tmp_path / "serve"), "--epochs", "2", "--max-seq-length", "32", "--batch-size", "16",
        "--min-accuracy", "0", "--min-auc", "0",
    ]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "[Trainer] the model did not leave chance (val_loss " in out
    assert "  chance        the model did not leave chance (val_loss " in out
    # the rate to try is below the run's (the recipe's 1e-4 for a small encoder)
    tries = "try, in this order: more epochs (--epochs), a lower learning rate (--learning-rate 3e-05, about a third"
    assert f"{tries} of this run's 0.0001)" in out

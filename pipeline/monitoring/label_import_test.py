import csv
import json

import numpy as np
import pytest

from models.errors import UserError
from pipeline.config import pipeline_config
from pipeline.monitoring import labeling_queue
from pipeline.monitoring.descriptors import Described
from pipeline.monitoring.label_import import import_labels, read_labeled
from pipeline.retraining import local_trigger
from tests import label_studio_env

REVIEWS = ["a moving, funny film", "dull and far too long", "the cast is wonderful", "I fell asleep twice"] * 25


def _config(tmp_path, **dataset):
    data = tmp_path / "data"
    (data / "span-1").mkdir(parents=True)
    with open(data / "span-1" / "a.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["review", "verdict"])
        writer.writerows((f"{text}, take {i}", "fresh" if i % 2 == 0 else "rotten") for i, text in enumerate(REVIEWS))
    (data / "span-1" / "_SUCCESS").write_text("")
    overrides = {
        "pipeline_root": str(tmp_path / "pipeline"),
        "dataset": {
            "name": "csv",
            "data_files": [f"{data}/span-{{SPAN}}/*.csv"],
            "text_column": "review",
            "label_column": "verdict",
            "label_names": ["rotten", "fresh"],
            "ready_marker": "_SUCCESS",
            "span_window": 2,  # a labeling round's few texts join the span before
            **dataset,
        },
    }
    return pipeline_config.load_config(overrides=overrides), data


def _queue(tmp_path) -> tuple[list[dict], object]:
    """A queue `hftfx monitor --queue 3` writes from 20 served texts (4 distinct), and its file."""
    texts = ("new gadget, broken on arrival", "great phone", "great phone", "a film about phones") * 5
    probabilities = np.array([[0.5, 0.5], [0.9, 0.1], [0.9, 0.1], [0.6, 0.4]] * 5)
    served = Described(chars=np.array([len(t) for t in texts]), probabilities=probabilities, texts=texts)
    rows = [{"text": t, "time": "2026-11-29T10:00:00+00:00"} for t in texts]
    picked = labeling_queue.pick(served, REVIEWS, 3)
    assert texts[picked[0]] == "new gadget, broken on arrival"  # a tie, and unlike the training texts
    assert len({texts[i] for i in picked}) == 3  # each text once
    queued = labeling_queue.tasks(rows, picked, served, ("rotten", "fresh"), "17")
    return queued, labeling_queue.write_queue(tmp_path / "queue.json", queued, ("rotten", "fresh"))


def test_a_queue_labeled_in_label_studio_becomes_the_next_span_that_the_trigger_would_train(tmp_path):
    """Label Studio's own SDK (the reference environment) takes the config, the tasks and the model's
    pre-annotations, and makes the export's annotations, which `hftfx label import` turns into span 2."""
    config, data = _config(tmp_path)
    _, written = _queue(tmp_path)
    config_xml = tmp_path / labeling_queue.CONFIG_FILE
    assert label_studio_env.problems(config_xml, written) == []
    export = tmp_path / "export.json"
    export.write_text(json.dumps(label_studio_env.labeled_export(config_xml, written, ["rotten", "fresh", None])))
    span, path, count, unlabeled = import_labels(config, export)
    assert (span, count, unlabeled) == (2, 2, 1)
    assert path == data / "span-2" / "labeled.csv" and (data / "span-2" / "_SUCCESS").exists()
    with open(path, newline="") as handle:
        assert [row["verdict"] for row in csv.DictReader(handle)] == ["rotten", "fresh"]
    decision = local_trigger.check(config)
    assert decision.train and decision.span == 2


def test_label_studio_names_a_pre_annotation_outside_the_config(tmp_path):
    """The SDK check can fail: a label the config does not offer is refused by Label Studio's parser."""
    queued, written = _queue(tmp_path)
    queued[0]["predictions"][0]["result"][0]["value"]["choices"] = ["stale"]
    written.write_text(json.dumps(queued))
    (problem,) = label_studio_env.problems(tmp_path / labeling_queue.CONFIG_FILE, written)
    assert problem.startswith("task 0: ") and "stale" in problem


def test_a_span_that_fails_the_examplegens_checks_is_removed_and_the_export_kept(tmp_path):
    config, data = _config(tmp_path)
    export = tmp_path / "labels.csv"
    export.write_text("text,label\na fine film,fresh\nawful,terrible\n")
    with pytest.raises(UserError, match="terrible"):
        import_labels(config, export)
    assert not (data / "span-2").exists() or not any((data / "span-2").iterdir())
    assert export.read_text().endswith("awful,terrible\n")


def test_bad_exports_are_refused_with_what_to_do(tmp_path):
    (tmp_path / "x.json").write_text('{"not": "a list"}')
    with pytest.raises(UserError, match="a JSON list of tasks"):
        read_labeled(tmp_path / "x.json")
    (tmp_path / "y.csv").write_text("review,stars\nok,5\n")
    with pytest.raises(UserError, match="needs 'text' and 'label'"):
        read_labeled(tmp_path / "y.csv")
    config, _ = _config(tmp_path / "ds", data_files=[str(tmp_path / "flat.csv")])
    (tmp_path / "z.csv").write_text("text,label\nok,fresh\n")
    with pytest.raises(UserError, match=r"no \{SPAN\} pattern"):
        import_labels(config, tmp_path / "z.csv")

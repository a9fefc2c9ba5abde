"""The whole pipeline under LocalDagRunner with a tiny BERT: real components, MLMD sqlite, Beam DirectRunner.

Asserted from ML Metadata and the artifacts: every component ran, TFMA measured accuracy and AUC, the model
was blessed and pushed, and the pushed SavedModel answers raw strings in a fresh process. A second run
with a threshold no model can meet is not blessed and pushes nothing.
"""

import contextlib
import json
import logging
import logging.handlers
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.publisher.model_card import parse_card
from components.pusher.local_push import PUSH_LOCK
from models.hardware.flops import EncoderShape
from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from pipeline.reporting.metadata_reader import open_store
from tests import fake_pubsub, label_studio_env, monitored_serving, vertex_container
from tests.float_bounds import probability_bound
from tests.hf_export_check import BUCKET_TEXTS, hf_probabilities, serving_probabilities
from tests.pipeline_nodes import COMPONENTS
from tests.serve_request import FP32
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e")


EXAMPLE_ROWS = Path(__file__).parent.parent / "examples" / "unlabeled-reviews.jsonl"


def unlabeled_rows(workdir) -> Path:
    """The shipped example rows and one without a text: what the pipeline's BatchScorer scores."""
    path = workdir / "unlabeled.jsonl"
    path.write_text(EXAMPLE_ROWS.read_text() + '{"review_id": "r999", "text": null}\n')
    return path


def tiny_config(workdir, model_dir, **evaluation):
    limits = {"train": 384, "eval": 64, "test": 160}
    scoring = {"input": str(unlabeled_rows(workdir)), "id_columns": ["review_id"]}
    return pipeline_config.load_config(
        overrides={**tiny_overrides(workdir, model_dir, 32, **evaluation), "dataset.limits": limits, "scoring": scoring}
    )


@pytest.fixture(scope="module")
def run_temp_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("run-temp")


@pytest.fixture(scope="module")
def direct_runner_log():
    """What Beam's DirectRunner logs while the module's runs go on: which runner it picks, and its fallbacks."""
    logger = logging.getLogger("apache_beam.runners.direct.direct_runner")
    records = logging.handlers.BufferingHandler(capacity=10_000)
    saved = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(records)
    yield records.buffer
    logger.removeHandler(records)
    logger.setLevel(saved[0])
    logger.propagate = saved[1]


@pytest.fixture(scope="module")
def first_run_model_batches():
    """Rows of each batch TFMA handed the exported model in the first run (the Evaluator runs in-process)."""
    return []


@pytest.fixture(scope="module")
def first_run(workdir, tiny_bert_dir, run_temp_dir, direct_runner_log, first_run_model_batches):
    """The default local run, with a temp dir of its own: what it leaves there is checked."""
    from tensorflow_model_analysis.utils import model_util, util

    run_signature = model_util.ModelSignaturesDoFn._batch_reducible_process

    def recorded(self, element):
        first_run_model_batches.append(util.batch_size(element))
        return run_signature(self, element)

    config = tiny_config(workdir, tiny_bert_dir)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(run_temp_dir))
        patch.setattr(model_util.ModelSignaturesDoFn, "_batch_reducible_process", recorded)
        return config, run_local(config)


def test_every_component_executed_and_is_in_mlmd(first_run):
    config, summary = first_run
    assert {c.name for c in summary.components} == COMPONENTS
    assert all(c.state == "done" for c in summary.components), summary.components
    store = open_store(config.metadata_sqlite)
    types = {t.name for t in store.get_execution_types()}
    assert {
        "components.example_gen.component.HFDatasetExampleGen",
        "components.trainer.component.HFTrainer",
        "components.evaluator.component.TaskEvaluator",
    } <= types
    assert summary.split_counts == {"train": 384, "eval": 64, "test": 160}
    assert summary.label_names == ["rotten", "fresh"]


def test_the_local_run_builds_no_copy_of_tfx_in_the_temp_dir(first_run, run_temp_dir):
    """Given any Beam argument, each TFX Beam component copies the installed tfx package (42 MB) into a new temp
    dir and builds an sdist of it for remote workers: a second per component, never deleted. The local
    DirectRunner has no remote workers, and its defaults need no arguments."""
    assert not sorted(run_temp_dir.glob("*/build/tfx")), "a Beam component packaged TFX for remote workers"


def test_the_local_run_never_hands_a_component_to_beams_direct_runner(first_run, direct_runner_log):
    """Since Beam 2.68 the DirectRunner first downloads Prism from GitHub and runs the pipeline there, falling
    back to FnApiRunner when it cannot (as here): machines that reach GitHub would run another runner."""
    assert not [record.getMessage() for record in direct_runner_log]


def test_trainer_reports_model_flops_against_the_measured_matmul_peak(first_run):
    _, summary = first_run
    throughput = summary.throughput
    assert throughput["steps"] == 384 // 16
    # precision auto is fp32 on any CPU (bf16 runs in user_data_e2e_test's integer-labels scenario); the peak is
    # measured in the dtype the loop trains in
    dtype = "float32"
    assert throughput["matmul_peak_dtype"] == dtype and throughput["matmul_peak_gflops"] > 1
    # the tiny encoder's FLOPs at the full width of 32, less what the auto batch widths cut (the summary
    # names them; none: every batch is 32 wide)
    shape = EncoderShape(**throughput["encoder"])
    full_width = shape.training_flops(384, 384 * 32, 384 * 32 * 32)
    buckets = re.search(r"batch widths ([\d, ]+|none) \(auto: ", summary.lengths)[1]
    if buckets == "none":
        assert throughput["training_flops"] == pytest.approx(full_width)
    else:
        assert 0.2 * full_width < throughput["training_flops"] < full_width
    assert 0 < throughput["utilization"] < 1.5
    assert 0 < throughput["padding_share"] < 1
    assert f"of this machine's {dtype} matmul peak" in summary.render()


def test_evaluator_measured_accuracy_and_auc_on_the_test_split(first_run):
    _, summary = first_run
    assert summary.metrics["example_count"] == 160
    assert 0.0 <= summary.metrics["accuracy"] <= 1.0
    assert 0.0 <= summary.metrics["auc"] <= 1.0
    assert {"label_name=fresh", "label_name=rotten"} <= set(summary.slices)
    assert any(name.startswith("length_bucket=") for name in summary.slices)


def test_the_evaluator_runs_each_signature_once_over_the_whole_test_split(first_run, first_run_model_batches):
    """TFX reads the examples in Beam's adaptive batches (1, 2, 4 ... rows): without the Evaluator's rebatching
    TFMA called the transform and evaluator signatures once per such batch (36 calls for the default's 1,282
    reviews), each sorting only its own rows by length."""
    assert first_run_model_batches == [160, 160]


def test_model_was_blessed_and_pushed_in_tf_serving_layout(first_run):
    config, summary = first_run
    assert summary.blessed is True
    version_dir = summary.pushed_dir
    assert os.path.dirname(version_dir) == config.push_base_directory
    assert os.path.basename(version_dir).isdigit()
    assert os.path.isfile(os.path.join(version_dir, "saved_model.pb"))
    left = [n for n in os.listdir(config.push_base_directory) if not n.isdigit() and n != PUSH_LOCK]
    assert not left, "no staging leftovers"


def test_pushed_model_holds_the_signatures_and_weights_and_nothing_of_training(first_run):
    """The optimizer's slots (two per weight for AdamW) stay out of the export: they would triple its size;
    so do Keras' per-layer call traces, which slow every save and load and serve only reloading as Keras.
    The three classifying signatures call one shared function holding the model and its shortest-first loop (the
    monitor's representation signature another)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    from tests.tiny_model import tiny_bert_weight_count

    _, summary = first_run
    saved = dict(tf.train.list_variables(os.path.join(summary.pushed_dir, "variables", "variables")))
    assert not [name for name in saved if "OPTIMIZER" in name or "optimizer" in name]
    stored = sum(int(np.prod(shape)) for name, shape in saved.items() if name.endswith("VARIABLE_VALUE"))
    assert stored == tiny_bert_weight_count(num_labels=2)

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(summary.pushed_dir, "saved_model.pb"), "rb") as file:
        saved_model.ParseFromString(file.read())
    library = saved_model.meta_graphs[0].graph_def.library.function
    assert not [f.signature.name for f in library if "call_and_return_conditional_losses" in f.signature.name]
    # and no other loop: bounded by max_seq_length, attention has no loop over pieces past 512 tokens (bound_width)
    holding_the_loop = {
        re.sub(r"^__inference_|_\d+$", "", f.signature.name)
        for f in library
        if any(node.op in ("While", "StatelessWhile") for node in f.node_def)
    }
    assert holding_the_loop == {"_classify_raw", "_represent_raw"}  # the monitor's signature runs its own


def test_pushed_model_answers_raw_strings_in_a_fresh_process(first_run, tiny_bert_dir):
    _, summary = first_run
    script = textwrap.dedent(f"""
        import json, os
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        import tensorflow as tf
        import tensorflow_text  # TF Serving builds with TF.Text ops register them the same way
        model = tf.saved_model.load({summary.pushed_dir!r})
        out = model.signatures["serving_default"](text=tf.constant(["a wonderful film", "", "dull " * 300]))
        examples = [tf.train.Example(features=tf.train.Features(feature={{"text": tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[b"a wonderful film"]))}})).SerializeToString()]
        by_example = model.signatures["serving_tf_example"](examples=tf.constant(examples))
        print(json.dumps({{
            "signatures": sorted(model.signatures.keys()),
            "probabilities": out["probabilities"].numpy().tolist(),
            "labels": [v.decode() for v in out["label"].numpy()],
            "same_as_text": by_example["probabilities"].numpy().tolist()[0],
        }}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["signatures"] == [
        "representation",
        "serving_default",
        "serving_evaluator",
        "serving_tf_example",
        "transform_features",
    ]
    assert len(answer["probabilities"]) == 3
    assert all(abs(sum(p) - 1) < 1e-4 and len(p) == 2 for p in answer["probabilities"])
    assert set(answer["labels"]) <= {"rotten", "fresh"}
    # one tf.Example against three texts in one call: other shapes, the same model (tests/float_bounds.py)
    bound = probability_bound(tiny_bert_dir, 32)
    assert answer["same_as_text"] == pytest.approx(answer["probabilities"][0], abs=bound)


@pytest.fixture(scope="module")
def strict_run(first_run, workdir, tiny_bert_dir):
    """A second run whose AUC bound no model meets; the first run's blessed model is its baseline."""
    config, _ = first_run
    before = sorted(os.listdir(config.push_base_directory))
    return before, run_local(tiny_config(workdir, tiny_bert_dir, min_auc=0.999))


def test_a_threshold_no_model_meets_blocks_blessing_and_push(first_run, strict_run):
    config, _ = first_run
    before, summary = strict_run
    assert summary.blessed is False
    assert "auc" in summary.blessing_reason
    # the first run's blessed model took part as the baseline; the candidate's own metrics are reported
    assert 0 <= summary.metrics["auc"] <= 1 and summary.metrics["example_count"] == 160
    assert set(summary.baseline_metrics) >= {"accuracy", "auc"}
    # a baseline took part, so TFMA computed intervals (evaluation.confidence_intervals auto); the first run had none
    assert first_run[1].intervals == {} and first_run[1].changes == {}
    low, high = summary.intervals["auc"]
    assert low < summary.metrics["auc"] < high and high - low < 0.5
    assert summary.changes["auc"] == (0.0, 0.0, 0.0)  # the cached Trainer's model is its own baseline
    assert "  vs baseline   " in summary.render() and "auc +0.0000 (95% +0.0000 to +0.0000)" in summary.render()
    assert summary.pushed_dir is None
    assert sorted(os.listdir(config.push_base_directory)) == before
    states = {c.name: c.state for c in summary.components}
    assert states["Trainer"] == "cached" and states["Evaluator"] == "done"
    assert summary.hf_model_dir is None  # no Hugging Face export of an unblessed model either
    assert summary.scored == {}  # and no scoring


def test_blessed_model_is_published_in_the_hugging_face_layout(first_run):
    """The folder transformers loads, with the run's label set and PyTorch-layout weights: transformers 5 + PyTorch
    (AutoTokenizer, AutoModelForSequenceClassification) give the SavedModel's probabilities on texts of every length
    bucket, the truncated ones included. Our own BERT encoder trained it: no tf_model.h5 (no TF class computes it)."""
    _, summary = first_run
    folder = Path(summary.hf_model_dir)
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert "tf_model.h5" not in names
    assert "README.md" in names
    model_config = json.loads((folder / "config.json").read_text())
    assert model_config["id2label"] == {"0": "rotten", "1": "fresh"}
    assert model_config["label2id"] == {"rotten": 0, "fresh": 1}
    assert model_config["problem_type"] == "single_label_classification"
    hf, _ = hf_probabilities(str(folder), BUCKET_TEXTS)
    served = serving_probabilities(summary.pushed_dir, BUCKET_TEXTS)
    assert hf.shape == served.shape == (len(BUCKET_TEXTS), 2)
    assert np.abs(hf - served).max() < 1e-4


def test_the_blessed_model_scores_the_unlabeled_rows_in_the_pipeline(first_run, tiny_bert_dir):
    """scoring.input: the BatchScorer step writes what `hftfx predict --input` would, with the blessed model."""
    _, summary = first_run
    scored = summary.scored
    assert (scored["rows"], scored["bad_rows"]) == (10, 1) and sum(scored["label_counts"].values()) == 10
    rows = {r["review_id"]: r for r in map(json.loads, Path(scored["file"]).read_text().splitlines())}
    source = {r["review_id"]: r["text"] for r in map(json.loads, EXAMPLE_ROWS.read_text().splitlines())}
    assert set(rows) == set(source)
    ids = sorted(source)
    served = serving_probabilities(summary.pushed_dir, [source[i] for i in ids])
    probabilities = np.array([[rows[i]["p_rotten"], rows[i]["p_fresh"]] for i in ids])
    assert np.abs(served - probabilities).max() <= probability_bound(tiny_bert_dir, 32)  # other batches, same model
    bad = json.loads((Path(scored["file"]).parent / "scored.bad.jsonl").read_text())
    assert bad["row"] == {"review_id": "r999", "text": None} and "missing" in bad["reason"]
    assert "  scored        10 rows (" in summary.render()


def test_model_card_holds_the_run_and_its_metadata_parses_with_huggingface_hub(first_run):
    _, summary = first_run
    card = parse_card((Path(summary.hf_model_dir) / "README.md").read_text())
    assert card.data.pipeline_tag == "text-classification" and card.data.library_name == "transformers"
    assert card.data.datasets == ["cornell-movie-review-data/rotten_tomatoes"]
    results = {r.metric_type: r.metric_value for r in card.data.eval_results}
    assert results["accuracy"] == round(summary.metrics["accuracy"], 4)
    assert results["auc"] == round(summary.metrics["auc"], 4)
    assert all(r.dataset_split == "test" for r in card.data.eval_results)
    assert "Blessed: every threshold met" in card.text
    assert "| length_bucket=33+ |" in card.text  # the per-slice table
    assert re.search(r"train: [\d.]+% of texts truncated", card.text)
    assert "Scripts seen in the training texts: LATIN" in card.text
    # WordPiece: 2 x 32 tokens x 100 characters (its longest word split; a longer one is one [UNK])
    assert "the export cuts a text to its first 6,400 characters (whitespace not counted)" in card.text


@pytest.fixture(scope="module")
def served_model(first_run):
    from models.serving.pushed_model import load_serving_model

    return load_serving_model(first_run[1].pushed_dir)[1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=3000), min_size=1, max_size=5)
)
def test_fuzzed_requests_to_the_serving_signature(served_model, texts):
    import numpy as np
    import tensorflow as tf

    out = served_model.signatures["serving_default"](text=tf.constant(texts, dtype=tf.string))
    probabilities = out["probabilities"].numpy()
    assert probabilities.shape == (len(texts), 2)
    assert np.isfinite(probabilities).all()
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    assert set(out["label"].numpy().tolist()) <= {b"rotten", b"fresh"}


def test_empty_request_gives_an_empty_answer(served_model):
    import tensorflow as tf

    out = served_model.signatures["serving_default"](text=tf.constant([], dtype=tf.string))
    assert out["probabilities"].shape == (0, 2)
    assert out["label"].shape == (0,)


def test_statistics_of_the_transformed_examples_report_truncation_and_unknown_tokens(first_run):
    import glob

    import tensorflow_data_validation as tfdv

    from pipeline.reporting.report import tokenization_summary

    config, _ = first_run
    (path,) = glob.glob(f"{config.pipeline_root}/TransformedStatisticsGen/statistics/*/Split-train/FeatureStats.pb")
    features = {f.path.step[0]: f for f in tfdv.load_stats_binary(path).datasets[0].features}
    truncated = features["truncated"].num_stats
    assert 0 < truncated.mean < 1, "the corpus has reviews over 32 tokens, and most are shorter"
    assert features["token_count"].num_stats.max > 30
    assert features["unknown_tokens"].num_stats.num_zeros > 0, "the real vocab covers most reviews whole"
    assert "of texts hold [UNK] tokens" in tokenization_summary(path)


def test_exported_ops_are_core_or_the_tf_text_ops_tf_serving_links(first_run):
    from models.serving import tf_serving

    ops = tf_serving.graph_ops(first_run[1].pushed_dir)
    assert tf_serving.unsupported_ops(ops) == []
    text_ops = {op for op in ops if not tf_serving.is_core_op(op)}
    assert text_ops == {"NormalizeUTF8", "RegexSplitWithOffsets", "WordpieceTokenizeWithOffsets"}  # WordPiece's
    assert text_ops <= tf_serving.TEXT_OPS_IN_TF_SERVING


def test_warmup_requests_ship_with_the_export_and_replay(first_run, served_model):
    from models.serving import tf_serving

    pushed = first_run[1].pushed_dir
    assert os.path.isfile(os.path.join(pushed, tf_serving.WARMUP_FILE))
    assert tf_serving.replay_warmup_requests(served_model, pushed) == 3


def test_rest_payloads_map_onto_the_signatures(served_model, tiny_bert_dir):
    import base64

    import tensorflow as tf

    from models.serving import tf_serving

    by_text = tf_serving.predict(served_model, {"instances": ["a wonderful film", "dull"]})["predictions"]
    assert [set(p) for p in by_text] == [{"probabilities", "label", "label_id", "confidence"}] * 2
    by_example = tf_serving.predict(
        served_model, {"signature_name": "serving_tf_example", "examples": [{"text": "a wonderful film"}]}
    )["predictions"]
    # one example against two texts: other shapes, the same model (tests/float_bounds.py)
    bound = probability_bound(tiny_bert_dir, 32)
    assert by_example[0]["probabilities"] == pytest.approx(by_text[0]["probabilities"], abs=bound)
    serialized = tf.train.Example(
        features=tf.train.Features(
            feature={"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a wonderful film"]))}
        )
    ).SerializeToString()
    by_b64 = tf_serving.predict(
        served_model,
        {"signature_name": "serving_tf_example", "instances": [{"b64": base64.b64encode(serialized).decode()}]},
    )
    assert by_b64["predictions"][0]["label"] == by_text[0]["label"]
    columnar = tf_serving.predict(served_model, {"inputs": {"text": ["a wonderful film"]}})
    assert columnar["predictions"][0]["label_id"] == by_text[0]["label_id"]
    assert tf_serving.predict(served_model, {"instances": []}) == {"predictions": []}
    long = tf_serving.predict(served_model, {"instances": ["word " * 5000]})["predictions"]
    assert len(long) == 1 and len(long[0]["probabilities"]) == 2


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"instances": [1, 2]}, "not a string"),
        ({"instances": "a single string"}, 'needs "instances"'),
        ({"signature_name": "nope", "instances": ["x"]}, "no signature 'nope'"),
        ({"examples": [{"text": 1.5}]}, "strings or integers"),
        ([], "JSON object"),
    ],
)
def test_bad_requests_get_a_clear_400(served_model, payload, message):
    from models.serving import tf_serving

    with pytest.raises(tf_serving.BadRequestError, match=message):
        tf_serving.predict(served_model, payload)


def test_scoring_in_bf16_keeps_fp32s_answers_within_the_tolerance(first_run, review_texts, tmp_path):
    """`hftfx predict --precision bf16` rewrites the same SavedModel to bf16 at load (emulated on a CPU without
    AVX512-BF16 or AMX, as the line says): 99% of probabilities within 0.01 of fp32's, none past the drift limit, at
    least 99.5% of labels equal. `auto` on such a CPU computes in fp32."""
    from models.hardware.cpu_features import cpu_supports_bf16
    from models.serving.precision import BF16_DRIFT_LIMIT

    pushed, texts = first_run[1].pushed_dir, review_texts[:400]
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    hftfx = [sys.executable, "-m", "pipeline.cli", "predict", "--model", pushed]
    scored = tmp_path / "scored.jsonl"
    done = subprocess.run(
        [*hftfx, "--precision", "bf16", "--input", str(rows), "--output", str(scored)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "in bf16 (asked for" in done.stdout and "scoring in fp32" not in done.stderr
    answers = sorted(map(json.loads, scored.read_text().splitlines()), key=lambda row: row["id"])
    bf16 = np.array([[row["p_rotten"], row["p_fresh"]] for row in answers])
    fp32 = serving_probabilities(pushed, texts)
    assert np.quantile(np.abs(bf16 - fp32), 0.99) <= 0.01 and np.abs(bf16 - fp32).max() <= BF16_DRIFT_LIMIT
    assert (bf16.argmax(1) == fp32.argmax(1)).mean() >= 0.995
    assert np.abs(bf16 - fp32).max() > 1e-6, "the rewrite ran: bf16 moves the answers a little"
    auto = subprocess.run([*hftfx, "a wonderful film"], capture_output=True, text=True, timeout=300, check=False)
    assert auto.returncode == 0, auto.stderr[-3000:]
    expected = "in bf16 (auto: this CPU computes bf16 natively" if cpu_supports_bf16() else "in fp32 (auto: this CPU"
    assert expected in auto.stdout


def test_serve_check_cli_in_a_fresh_process(first_run):
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "serve-check", first_run[1].pushed_dir],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "replayed 3 requests" in done.stdout
    assert done.stdout.count('"predictions"') == 2


def test_the_image_default_command_serves_as_a_vertex_custom_container(first_run, served_model):
    """What a Vertex endpoint runs: `hftfx serve` with the variables Vertex AI sets in the container; the
    storage URI has a scheme, so the model is copied in through TF's filesystems as from gs://."""
    from models.serving import tf_serving
    from models.serving.precision import BF16_DRIFT_LIMIT

    command = [sys.executable, "-m", "pipeline.cli", "serve"]
    with vertex_container.serving(command, f"file://{first_run[1].pushed_dir}") as container:
        request = {"instances": ["a warm, funny and moving film", "a tedious mess"], "parameters": {}}
        status, answer = vertex_container.http_json(container.predict, request)
        assert status == 200, answer
        assert vertex_container.http_json(container.predict, {"instances": [7]})[0] == 400
        assert vertex_container.http_json(container.base + "/elsewhere")[0] == 404
    # --precision auto: bf16 on a CPU that computes it natively, else fp32, as the start line says
    (started,) = [line for line in container.output if line.startswith("serving ")]
    # fp32: the same request, so the same shapes and sums on this CPU; 1e-5 covers the JSON round trip
    assert re.search(r" in (fp32|bf16) \(auto", started), started
    bound = BF16_DRIFT_LIMIT if " in bf16 (auto" in started else 1e-5
    expected = tf_serving.predict(served_model, request)
    for got, want in zip(answer["predictions"], expected["predictions"], strict=True):
        assert got["probabilities"] == pytest.approx(want["probabilities"], abs=bound)
        assert got["label"] == want["label"] or abs(want["probabilities"][0] - 0.5) <= bound


def _raw_exchange(base: str, request: bytes, wait: float) -> tuple[bytes, float]:
    """Sends `request` bytes as they are and reads the answer: (its status line, seconds it took)."""
    import socket
    import time
    from urllib.parse import urlsplit

    url = urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=wait) as connection:
        started = time.monotonic()
        connection.sendall(request)
        answer = connection.recv(200)
        return answer.split(b"\r\n")[0], time.monotonic() - started


def _twice_set_example_request() -> dict:
    """A tf.Example whose 'text' Feature holds an int64_list and then a bytes_list: protobuf keeps the last, so it
    parses whole, while the signature's ParseExample fails the model call on it."""
    import base64

    import tensorflow as tf

    ints = tf.train.Feature(int64_list=tf.train.Int64List(value=[7])).SerializeToString()
    texts = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a film"])).SerializeToString()
    entry = b"\x0a\x04text" + b"\x12" + bytes([len(ints + texts)]) + ints + texts
    example = b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry
    assert tf.train.Example.FromString(example).features.feature["text"].bytes_list.value == [b"a film"]
    return {"signature_name": "serving_tf_example", "instances": [{"b64": base64.b64encode(example).decode()}]}


def _refuses_bad_requests_with_their_reasons(container) -> None:
    """Each bad body a 4xx with its reason in bounded time; a normal request still answers after them."""
    import urllib.error
    import urllib.request

    predict = container.predict
    bad = [
        ({"instances": ["x"] * 1000}, 413, "at most 256"),
        ({"instances": [{"b64": "%%%"}]}, 400, "is not base64"),
        ({"instances": [{"text": 5}]}, 400, "is not a string"),
        ({"inputs": {"text": ["a", "b"], "other": ["c"]}}, 400, "must map ['text'] to lists"),
        ({"examples": [{"text": 2**70}]}, 400, "examples"),
        ({"signature_name": "nope", "instances": ["a"]}, 400, "signature 'nope' is not served"),
        ([1, 2], 400, "must be a JSON object"),
        (_twice_set_example_request(), 400, "sets its feature 'text' more than once"),
    ]
    for body, status, reason in bad:
        got, answer = vertex_container.http_json(predict, body)
        assert (got, reason in answer["error"]) == (status, True), (body, got, answer)
    route = "/" + predict.split("/", 3)[3]
    head = f"POST {route} HTTP/1.1\r\nHost: x\r\n"
    status, _ = _raw_exchange(container.base, f"{head}Content-Length: 9\r\n\r\n{{not json".encode(), 30)
    assert status == b"HTTP/1.1 400 Bad Request"
    big = urllib.request.Request(predict, data=b"x" * 20_000_000, headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(big, timeout=60)
    assert refused.value.code == 413
    status, seconds = _raw_exchange(container.base, f'{head}Content-Length: 100\r\n\r\n{{"inst'.encode(), 30)
    assert status == b"HTTP/1.1 408 Request Timeout" and seconds < 10
    assert vertex_container.http_json(predict, {"instances": ["still answering"]})[0] == 200


def _one_text_each(predict: str, texts: list[str]) -> list[tuple[int, dict]]:
    """Every text in a request of its own, all at once: (status, answer); no header says anything of the others."""
    import concurrent.futures
    import json
    import urllib.error
    import urllib.request

    def one(text):
        body = json.dumps({"instances": [text]}).encode()  # a lone surrogate travels as \ud83d, valid JSON
        try:
            with urllib.request.urlopen(urllib.request.Request(predict, data=body), timeout=120) as response:
                assert not [h for h in response.headers if h.lower().startswith("x-batch")], response.headers
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    with concurrent.futures.ThreadPoolExecutor(len(texts)) as pool:
        return list(pool.map(one, texts))


def _answered_as_alone(served_model, texts: list[str], answers: list[tuple[int, dict]]) -> None:
    """Each answer is what the SavedModel gives its text alone."""
    from models.serving import tf_serving

    alone = tf_serving.predict(served_model, {"instances": texts})["predictions"]
    for text, (status, answer), want in zip(texts, answers, alone, strict=True):
        assert status == 200, (text, answer)
        assert answer["predictions"][0]["label"] == want["label"]
        assert answer["predictions"][0]["probabilities"] == pytest.approx(want["probabilities"], abs=1e-5)


def test_the_server_answers_bad_input_with_its_reason_and_batches_concurrent_requests(first_run, served_model):
    """`hftfx serve` against a 20 MB body, a body that never finishes, 1,000 instances, malformed JSON, base64,
    types, columns and a tf.Example set twice: each a 4xx with its reason in bounded time, and the next normal request
    still answers; bodies of combining marks answer within a second, and a request behind them too.
    Concurrent one-text requests share model calls and get the answers they would get alone."""
    # fp32 on every CPU: the answers are compared with the SavedModel's own at 1e-5
    command = [sys.executable, "-m", "pipeline.cli", "serve", "--read-timeout", "2", *FP32]
    with vertex_container.serving(command, str(first_run[1].pushed_dir)) as container:
        _refuses_bad_requests_with_their_reasons(container)
        _combining_marks_answer_within_a_second(container)
        texts = [f"a film, take {i}: {'moving' if i % 2 else 'dull'}" for i in range(32)]
        answers = _one_text_each(container.predict, texts)
    (closing,) = [line for line in container.output if line.startswith("answered ")]
    counted = re.fullmatch(r"answered (\d+) prediction requests in (\d+) model calls.*", closing)
    requests, calls = map(int, counted.groups())
    assert calls < requests  # requests shared model calls
    _answered_as_alone(served_model, texts, answers)


def _idle_connections_leave_health_up(container, count: int, header_timeout: float) -> None:
    """`count` connections that send a request line and nothing more: /health stays 200, a normal request answers
    at once, and the server closes them after `header_timeout`."""
    import socket
    import time
    from urllib.parse import urlsplit

    url = urlsplit(container.base)
    idle = []
    try:
        for _ in range(count):
            connection = socket.create_connection((url.hostname, url.port), timeout=30)
            connection.sendall(b"POST /predict HTTP/1.1\r\n")  # the request line, then nothing
            idle.append(connection)
        assert vertex_container.http_json(container.health) == (200, {"status": "ready"})
        started = time.monotonic()
        status, answer = vertex_container.http_json(container.predict, {"instances": ["a moving film"]})
        assert status == 200 and time.monotonic() - started < 1, answer
        time.sleep(header_timeout + 2)  # the server has closed them (EOF, or a reset when evicted)
        closed = 0
        for connection in idle:
            try:
                closed += connection.recv(100) == b""
            except ConnectionResetError:
                closed += 1
        assert closed == len(idle)
    finally:
        for connection in idle:
            connection.close()


def test_poison_texts_fail_alone_and_idle_sockets_leave_health_up(first_run, served_model):
    """64 concurrent one-text requests, 8 of them a lone surrogate (half an emoji, valid JSON): the 56 good ones
    get the answers they get alone, the 8 a 400 naming the problem. 520 connections that send a request line and
    nothing more leave /health at 200 and a normal request answered; the server closes them after
    --header-timeout. Deep JSON is a 400."""
    import urllib.error
    import urllib.request

    command = [sys.executable, "-m", "pipeline.cli", "serve", "--header-timeout", "4", *FP32]
    with vertex_container.serving(command, str(first_run[1].pushed_dir)) as container:
        texts = ["\ud83d" if i % 8 == 3 else f"a film, take {i}: {'moving' if i % 2 else 'dull'}" for i in range(64)]
        answers = _one_text_each(container.predict, texts)
        good = [i for i, text in enumerate(texts) if text != "\ud83d"]
        _answered_as_alone(served_model, [texts[i] for i in good], [answers[i] for i in good])
        for i in set(range(64)) - set(good):
            assert answers[i][0] == 400 and "not valid Unicode" in answers[i][1]["error"], answers[i]
        deep = b'{"instances": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(container.predict, data=deep), timeout=60)
        assert refused.value.code == 400 and b"too deeply" in refused.value.read()
        _idle_connections_leave_health_up(container, 520, header_timeout=4)


def test_a_full_queue_answers_503_with_a_jittered_retry_after_and_a_request_larger_than_it_413(first_run):
    """A queue of 2 rows: concurrent 2-row requests either answered or told to retry after 1 to 5 s (drawn, so
    clients do not retry as a herd); a 3-row request, which no retry can fit, a 413 naming the limit. The
    pipeline's own signatures are not an API: transform_features is refused, and the model's error text stays in
    the log."""
    import concurrent.futures
    import json
    import urllib.error
    import urllib.request

    command = [sys.executable, "-m", "pipeline.cli", "serve", "--max-queued-rows", "2", "--batch-wait-ms", "200", *FP32]
    with vertex_container.serving(command, str(first_run[1].pushed_dir)) as container:

        def one(i):
            request = urllib.request.Request(container.predict, data=json.dumps({"instances": ["a", "b"]}).encode())
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    return response.status, None
            except urllib.error.HTTPError as error:
                return error.code, error.headers.get("Retry-After")

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(one, range(8)))
        status, answer = vertex_container.http_json(container.predict, {"instances": ["a", "b", "c"]})
        assert status == 413 and "more than the server ever queues (2 rows" in answer["error"], answer
        refused = {"signature_name": "transform_features", "instances": ["a"]}
        status, answer = vertex_container.http_json(container.predict, refused)
        assert status == 400 and "'transform_features' is not served" in answer["error"], answer
    assert (200, None) in answers and any(code == 503 for code, _ in answers)
    assert {code for code, _ in answers} <= {200, 503}
    assert all(1 <= int(after) <= 5 for code, after in answers if code == 503)


def _connections_past_their_head(container, count: int) -> list:
    """`count` connections whose request head arrived and whose declared body never does: half of them a POST to
    the predict route, half a GET /health answered at once, then one byte of its body (which kept the connection
    open for ever before)."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(container.base)
    route = "/" + container.predict.split("/", 3)[3]
    health = "/" + container.health.split("/", 3)[3]
    opened = []
    for index in range(count):
        connection = socket.create_connection((url.hostname, url.port), timeout=30)
        if index % 2:
            connection.sendall(f"GET {health} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n".encode())
        else:
            connection.sendall(f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{{".encode())
        opened.append(connection)
    for connection in opened[1::2]:
        with contextlib.suppress(OSError):
            connection.sendall(b"{")
    return opened


def test_connections_past_their_head_never_lock_the_server_out(first_run):
    """520 connections past their head, over the 512 the server holds: a new /health still answers 200 within a
    second (the oldest waiting connections make room, never the newcomer), and every one of them is closed by its
    deadline (head and body: --read-timeout + 1 s) or as soon as it was answered."""
    import time

    command = [sys.executable, "-m", "pipeline.cli", "serve", "--read-timeout", "3", *FP32]
    with vertex_container.serving(command, str(first_run[1].pushed_dir)) as container:
        opened = _connections_past_their_head(container, 520)
        try:
            for _ in range(3):
                started = time.monotonic()
                assert vertex_container.http_json(container.health) == (200, {"status": "ready"})
                assert time.monotonic() - started < 1
            time.sleep(3 + 1 + 2)
            closed = 0
            for connection in opened:
                try:
                    connection.settimeout(5)
                    while connection.recv(4096):  # an answer (408, or /health's 200), then the close
                        pass
                    closed += 1
                except (ConnectionResetError, BrokenPipeError):
                    closed += 1
            assert closed == len(opened)
        finally:
            for connection in opened:
                connection.close()


def _pipelining_readers(container, count: int, requests_each: int) -> list:
    """`count` connections that send `requests_each` pipelined GET /health as fast as the server takes them and read
    nothing (a receive window of a few KB)."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(container.base)
    health = "/" + container.health.split("/", 3)[3]
    requests = f"GET {health} HTTP/1.1\r\nHost: x\r\n\r\n".encode() * requests_each
    opened = []
    for _ in range(count):
        connection = socket.socket()
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        connection.connect((url.hostname, url.port))
        connection.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            connection.send(requests)  # what fits now: the server stops reading once its answers back up
        opened.append(connection)
    return opened


def _answers_until_closed(connection, within: float) -> int:
    """Reads what the server sent until it closed (EOF or reset): the number of answers; -1 if still open."""
    import time

    connection.setblocking(True)
    connection.settimeout(within)
    received, deadline = b"", time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            chunk = connection.recv(65536)
            if not chunk:
                return received.count(b"HTTP/1.1 200")
            received += chunk
    except (ConnectionResetError, BrokenPipeError):
        return received.count(b"HTTP/1.1 200")
    except TimeoutError:
        pass
    return -1


def _health_seconds(container, times: int) -> list[float]:
    import time

    seconds = []
    for _ in range(times):
        started = time.monotonic()
        assert vertex_container.http_json(container.health) == (200, {"status": "ready"})
        seconds.append(time.monotonic() - started)
    return seconds


def test_readers_that_never_read_are_closed_by_their_write_deadline_or_request_bound(first_run):
    """Connections that pipeline /health and never read: answers back up until the transport pauses, then the
    connection has --write-timeout to take them and is aborted (it held the server for ever before); with fewer
    requests than that, at most --max-requests-per-connection are answered, then the connection closes. A new
    /health answers throughout: within 20 ms behind 500 of them (0.3-0.9 s when each loop turn started every
    connection's next pipelined request)."""
    import time

    command = [sys.executable, "-m", "pipeline.cli", "serve", "--write-timeout", "2", *FP32]
    with vertex_container.serving(command, str(first_run[1].pushed_dir)) as container:
        readers = _pipelining_readers(container, 8, 40_000)
        try:
            time.sleep(1)
            during = _health_seconds(container, 5)
            time.sleep(2 + 1)
            answered = [_answers_until_closed(reader, 5) for reader in readers]
        finally:
            for reader in readers:
                reader.close()
        assert max(during) < 0.5, during
        assert all(0 < n < 40_000 for n in answered), answered  # aborted with answers still queued
        print(f"/health during 8 readers that never read: {max(during) * 1e3:.0f} ms at most")
    command = [sys.executable, "-m", "pipeline.cli", "serve", "--max-requests-per-connection", "50", *FP32]
    with vertex_container.serving(command, str(first_run[1].pushed_dir)) as container:
        readers = _pipelining_readers(container, 500, 200)  # and the /health probes: within the 512 connections
        try:
            time.sleep(1)  # their first requests are answered as they came, each a newcomer
            during = _health_seconds(container, 9)
            answered = [_answers_until_closed(reader, 30) for reader in readers]
        finally:
            for reader in readers:
                reader.close()
        print(f"/health during 500 readers that never read: {[round(s * 1e3) for s in during]} ms")
        assert sorted(during)[4] < 0.02 and max(during) < 0.2, during  # the median; a test worker runs beside
        assert answered == [50] * 500


def _combining_marks_answer_within_a_second(container) -> None:
    """"a" and two reversed runs of combining marks, 1.4 MB (normalization reorders each run, quadratic in its
    length: 3.9 s a body before runs were cut at 30 marks), three such bodies at once, then a one-word request."""
    import concurrent.futures
    import json
    import time
    import urllib.request

    marks = 350_000
    body = json.dumps({"instances": ["a" + "\u0301" * marks + "\u0316" * marks]}, ensure_ascii=False).encode()
    assert 1_300_000 < len(body) <= 1_500_000

    def timed(data: bytes) -> tuple[int, float]:
        started = time.monotonic()
        with urllib.request.urlopen(urllib.request.Request(container.predict, data=data), timeout=60) as answer:
            return answer.status, time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        marked = [pool.submit(timed, body) for _ in range(3)]
        time.sleep(0.05)
        word = pool.submit(timed, json.dumps({"instances": ["moving"]}).encode())
        answers = [future.result() for future in (*marked, word)]
    assert all(status == 200 for status, _ in answers), answers
    assert max(seconds for _, seconds in answers) < 1, answers


def test_turns_are_taken_by_the_connections_address_not_x_forwarded_for(first_run):
    """128 one-text requests from 127.0.0.1, each naming another address in X-Forwarded-For, then, once the model is
    busy with them, one from 127.0.0.2 (its connection open already), in model calls of 1 row: the two addresses take
    turns, so the second one's request is in the next calls. Trusted, the header made the flood 128 clients, each
    with a turn before the newcomer's: all 128 were answered first."""
    import concurrent.futures
    import http.client
    import json
    import time
    from urllib.parse import urlsplit

    command = [sys.executable, "-m", "pipeline.cli", "serve", "--max-batch", "1", *FP32]
    with vertex_container.serving(command, str(first_run[1].pushed_dir)) as container:
        url = urlsplit(container.predict)
        body = json.dumps({"instances": ["a moving film"]})

        def connect(source: str) -> http.client.HTTPConnection:
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=120, source_address=(source, 0))
            connection.connect()
            return connection

        def ask(connection: http.client.HTTPConnection, forwarded: str | None) -> float:
            headers = {"Content-Type": "application/json", **({"X-Forwarded-For": forwarded} if forwarded else {})}
            connection.request("POST", url.path, body, headers)
            assert connection.getresponse().status == 200
            connection.close()
            return time.monotonic()

        other = connect("127.0.0.2")
        with concurrent.futures.ThreadPoolExecutor(129) as pool:
            flood = [
                pool.submit(ask, connect("127.0.0.1"), f"203.0.113.{i % 250}, 198.51.100.{i}") for i in range(128)
            ]
            while sum(future.done() for future in flood) < 4:  # the model is busy, the rest of the flood queued
                time.sleep(0.001)
            honest = pool.submit(ask, other, None)
            finished = [future.result() for future in flood]
            honest_finished = honest.result()
    before = sum(done < honest_finished for done in finished)
    assert before < 64, f"{before} of the 128 flood requests were answered before the other address's one"


def test_run_report_has_every_section_with_embedded_plots(first_run, strict_run, tmp_path):
    import glob

    from pipeline.reporting.report import SECTIONS, build_report, training_series

    config, _ = first_run
    page = build_report(config.metadata_sqlite, config.pipeline_name, tmp_path / "report.html").read_text()
    for section in SECTIONS:
        assert f'<section id="{section}">' in page, section
    assert page.count("data:image/png;base64,") >= 2  # training curves; ROC/PR/confusion/calibration
    assert "BLESSED" in page and "label_name=fresh" in page and "Anomalies:</b> none" in page
    # a label's slice shows its accuracy (that label's recall), not the one-label AUC, precision and recall
    fresh_row = re.search(r"<tr><td>label_name=fresh</td>(.*?)</tr>", page)[1]
    assert re.match(r"<td>[\d.]+</td>(<td>n/a</td>){4}<td>\d+</td>$", fresh_row), fresh_row
    assert "On a label's slice, accuracy is that label's recall" in page
    assert "tokens per text mean" in page and "of texts hold [UNK] tokens" in page
    assert "took part as the baseline" in page  # the latest run is the strict one, with a baseline
    # the thresholds as the Evaluator ran them (TFMA's own eval config loader): absolute bounds and changes
    assert re.search(r"<tr><td>\w+</td><td>[\d.]+</td>", page) and "beyond the test split&#x27;s noise</td>" in page
    model_run = sorted(glob.glob(f"{config.pipeline_root}/Trainer/model_run/*"))[-1]
    curves = training_series(model_run)
    assert curves["train/epoch_loss"] and curves["validation/evaluation_loss_vs_iterations"]


def test_the_monitor_finds_no_drift_in_held_out_reviews_and_drift_in_another_script(first_run, tmp_path):
    """Served with a prediction log: the test split's reviews are no drift and their estimated accuracy holds the
    measured one; the same reviews in Cyrillic letters move the script, the tokens and the domain classifier."""
    config, summary = first_run
    reviews = monitored_serving.split_texts(summary.examples_uri, "test")
    output = monitored_serving.served_and_logged(summary.pushed_dir, tmp_path / "in-domain", reviews)
    assert any(f"logged {len(reviews)} rows to" in line for line in output if line.startswith("answered ")), output
    shifted_texts = monitored_serving.in_cyrillic(reviews)
    monitored_serving.served_and_logged(summary.pushed_dir, tmp_path / "shifted", shifted_texts)

    pubsub = fake_pubsub.FakePubSub({monitored_serving.NOTICES})
    with fake_pubsub.serve(pubsub) as emulator:
        in_json = str(tmp_path / "in.json")
        flags = ("--min-rows", "100", "--json", in_json, "--queue", "20")
        in_domain = monitored_serving.monitored(config, tmp_path / "in-domain", *flags, pubsub=emulator)
        assert in_domain.returncode == 0, in_domain.stderr[-3000:]
        assert not pubsub.received  # no drift: nobody is told
        shifted = monitored_serving.monitored(config, tmp_path / "shifted", "--min-rows", "100", pubsub=emulator)
    print(in_domain.stdout, shifted.stdout)
    assert "verdict: no drift" in in_domain.stdout
    _the_same_window_read_from_bigquery_is_no_drift(config, summary, tmp_path, in_domain.stdout)
    (queue,) = (tmp_path / "in-domain" / "labeling").rglob("*.json")
    tasks = json.loads(queue.read_text())
    assert len(tasks) == len({task["data"]["text"] for task in tasks}) == 20 and set(tasks[0]["data"]) >= {"text"}
    assert label_studio_env.problems(queue.parent / "labeling-config.xml", queue) == []  # Label Studio's own parser
    estimate = json.loads((tmp_path / "in.json").read_text())["estimated_accuracy"]
    assert estimate["low"] <= summary.metrics["accuracy"] <= estimate["high"], (estimate, summary.metrics)
    assert shifted.returncode == 0, shifted.stderr[-3000:]
    verdict = next(line for line in shifted.stdout.splitlines() if line.startswith("verdict: "))
    moved = set(verdict.removeprefix("verdict: drift: ").split(", "))
    assert {"script", "texts (domain classifier)", "tokens per text"} <= moved, verdict
    (written,) = (tmp_path / "shifted" / "monitor").rglob("*.json")
    assert json.loads(written.read_text())["drift"] is True
    assert '<p class="verdict false">drift: ' in (written.parent / "report.html").read_text()  # the windows' page
    ((message,),) = [request.messages for request in pubsub.received]
    assert message.attributes["event"] == "serving_drift" and json.loads(message.data)["verdict"] == verdict[9:]


def _the_same_window_read_from_bigquery_is_no_drift(config, summary, tmp_path, from_files: str) -> None:
    """`hftfx monitor --bigquery`: the window as a Vertex endpoint logs it, read with google-cloud-bigquery from a
    fake BigQuery (credentials from a fake metadata server, as on a VM), checks as the files did."""
    from models.serving.prediction_log import read_window
    from models.serving.pushed_model import resolve_version_dir
    from tests import fake_bigquery, fake_vertex

    table = "my-gcp-project.logging_hf_text_classifier_1.request_response_logging"
    rows = read_window(str(tmp_path / "in-domain")).rows
    fake = fake_bigquery.FakeBigQuery(table, monitored_serving.as_vertex_logs(rows))
    version_dir = str(resolve_version_dir(summary.pushed_dir))
    with (
        fake_bigquery.serve(fake) as address,
        fake_vertex.serve_metadata_server("my-gcp-project", "monitor@my-gcp-project.iam.gserviceaccount.com") as host,
    ):
        env = {"BIGQUERY_EMULATOR_HOST": address, "GCE_METADATA_HOST": host, "GCE_METADATA_IP": host}
        flags = ("--bigquery", f"bq://{table}", "--model", version_dir, "--min-rows", "100")
        done = monitored_serving.monitored(config, None, *flags, "--json", str(tmp_path / "bq.json"), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"model version 8571: {len(rows)} served rows" in done.stdout
    checks = lambda out: [line for line in out.splitlines() if line.startswith("  ")]  # noqa: E731
    assert checks(done.stdout) == checks(from_files)
    assert len(fake.received) == 1 and fake.received[0]["queryParameters"][0]["name"] == "since"

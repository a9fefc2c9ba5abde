import re

import pytest

from components.example_gen.config import DatasetConfig, dump_dataset_config, load_dataset_config
from pipeline.config import pipeline_config


def test_defaults_are_the_embedded_offline_run():
    config = pipeline_config.load_config()
    assert config.dataset.name == "packaged:rotten_tomatoes"
    assert config.model.name == "packaged:all-MiniLM-L6-v2"
    assert (config.model.max_seq_length, config.training.epochs) == ("auto", "auto")  # chosen from the data
    assert config.metadata_sqlite.endswith("metadata.sqlite")


def test_yaml_then_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("training:\n  epochs: 3\n  batch_size: 8\ndataset:\n  label_names: [neg, pos]\n")
    config = pipeline_config.load_config(path, {"training.epochs": "2", "dataset.limits.train": "100"})
    assert config.training.epochs == 2 and config.training.batch_size == 8
    assert config.dataset.label_names == ("neg", "pos")
    assert config.dataset.limits == {"train": 100}


def test_unknown_keys_and_wrong_types_are_named():
    with pytest.raises(
        pipeline_config.ConfigError, match=r"unknown config key 'training.epoch'; known in 'training': \['batch_size',"
    ):
        pipeline_config.load_config(overrides={"training.epoch": 2})
    with pytest.raises(
        pipeline_config.ConfigError,
        match=r"training\.epochs = 'many': should be auto or a number of epochs \(at least 1\) \(passes over",
    ):
        pipeline_config.load_config(overrides={"training.epochs": "many"})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"evaluation.min_auc": 1.5},
            r"evaluation.min_auc = 1.5: should be at most 1 \(allowed: >= 0, <= 1; blessing needs at least this test",
        ),
        ({"evaluation.min_accuracy": -0.1}, "evaluation.min_accuracy"),
        ({"training.precision": "fp8"}, "training.precision = 'fp8': should be 'auto', 'bf16', 'fp16' or 'fp32'"),
        ({"dataset.split_ratios": {"eval": 0}}, "split_ratios"),
        ({"dataset.split_ratios": {"dev": 0.1}}, "split_ratios"),
        (
            {"dataset.limits": {"validation": 10}},
            "dataset.limits key = 'validation': should be 'train', 'eval' or 'test'",
        ),
        ({"training.batch_widths": [48, 32]}, "batch_widths"),
        # The two kinds of length buckets had one name; a config of an older release is told the new one.
        ({"training.length_buckets": [32, 48]}, "'length_buckets' was renamed 'training.batch_widths'"),
        ({"evaluation.length_buckets": [16, 32]}, "'length_buckets' was renamed 'evaluation.length_slice_edges'"),
        ({"training.dropout": 1.0}, "training.dropout = 1.0: should be less than 1"),
        ({"dataset.label_names": ["a", "a"]}, "label_names"),
        ({"dataset.text_column": "label"}, "columns must differ: text_column='label', label_column='label'"),
    ],
)
def test_invalid_values_fail_before_anything_runs(overrides, message):
    with pytest.raises(pipeline_config.ConfigError, match=message):
        pipeline_config.load_config(overrides=overrides)


def test_dataset_config_round_trips_through_json():
    dataset = DatasetConfig(name="csv", data_files=("a.csv",), label_names=("x", "y"), limits={"test": 5})
    assert load_dataset_config(dump_dataset_config(dataset)) == dataset


@pytest.mark.parametrize(
    ("name", "builder", "options"),
    [
        ("reviews.csv", "csv", {}),
        ("data/*.TSV", "csv", {"delimiter": "\t"}),
        ("x/part-*.jsonl.gz", "json", {}),
        ("a.parquet", "parquet", {}),
    ],
)
def test_a_data_file_path_infers_its_builder(name, builder, options):
    config = pipeline_config.load_config(overrides={"dataset.name": name})
    assert (config.dataset.name, config.dataset.data_files) == (builder, (name,))
    assert config.dataset.builder_options == options


def test_hub_ids_and_builders_are_left_alone():
    assert pipeline_config.load_config(overrides={"dataset.name": "glue"}).dataset.name == "glue"
    kept = pipeline_config.load_config(overrides={"dataset.name": "csv", "dataset.data_files": ["a.csv"]}).dataset
    assert (kept.name, kept.data_files) == ("csv", ("a.csv",))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"dataset.missing_text": "skip"}, "dataset.missing_text = 'skip': should be 'error' or 'drop'"),
        ({"dataset.text_pair_column": "label"}, r"columns must differ.*text_pair_column='label'"),
        ({"dataset.label_names": ["only"]}, "at least two distinct labels"),
    ],
)
def test_bad_dataset_values_are_named(overrides, message):
    with pytest.raises(pipeline_config.ConfigError, match=message):
        pipeline_config.load_config(overrides=overrides)


def test_class_weights_take_a_mode_or_a_mapping_and_early_stopping_is_a_section(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "training:\n  epochs: 4\n  class_weights: {neg: 2, pos: 0.5}\n"
        "  early_stopping: {patience: 2, metric: val_accuracy}\n"
        "dataset:\n  label_names: [neg, pos]\n"
    )
    config = pipeline_config.load_config(path)
    assert config.training.class_weights == {"neg": 2.0, "pos": 0.5}
    assert config.training.early_stopping == pipeline_config.EarlyStoppingConfig(patience=2, metric="val_accuracy")
    flags = pipeline_config.load_config(
        overrides={"training.class_weights": "balanced", "training.early_stopping.patience": "1", "training.epochs": 2}
    )
    assert flags.training.class_weights == "balanced" and flags.training.early_stopping.patience == 1
    assert (
        pipeline_config.load_config().training.early_stopping.patience == "auto"
    )  # on where it can choose (models/training/epochs.py)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"training.class_weights": "balance"},
            "training.class_weights = 'balance': should be none or balanced or a mapping",
        ),
        ({"training.class_weights": {"neg": 0}}, "training.class_weights = {'neg': 0}: weights should be positive"),
        (
            {"training.class_weights": {"negative": 2}, "dataset.label_names": ["neg", "pos"]},
            r"training.class_weights names \['negative'\], which are not labels of this run",
        ),
        ({"training.early_stopping.patience": 1, "training.epochs": 1}, "needs training.epochs >= 2"),
        (
            {"training.early_stopping.metric": "val_auc", "training.epochs": 2},
            "training.early_stopping.metric = 'val_auc': should be 'val_loss' or 'val_accuracy'",
        ),
        ({"training.early_stopping.min_delta": -1}, "training.early_stopping.min_delta = -1: should be at least 0"),
        ({"evaluation.min_macro_f1": 1.2}, "evaluation.min_macro_f1 = 1.2: should be at most 1"),
    ],
)
def test_training_controls_are_checked_before_anything_runs(overrides, message):
    with pytest.raises(pipeline_config.ConfigError, match=message):
        pipeline_config.load_config(overrides=overrides)


def test_numbers_yaml_reads_where_text_is_expected_are_taken_as_text(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("dataset:\n  revision: 2024\n  builder_options: {header: 0}\n  data_files: a.csv\n")
    dataset = pipeline_config.load_config(path).dataset
    assert (dataset.revision, dataset.builder_options, dataset.data_files) == ("2024", {"header": "0"}, ("a.csv",))


def test_the_width_is_auto_or_a_number_and_head_tail_is_for_single_texts():
    assert (
        pipeline_config.load_config(overrides={"model.max_seq_length": "96"}).model.max_seq_length == 96
    )  # as --set gives it
    with pytest.raises(
        pipeline_config.ConfigError,
        match=r"model.max_seq_length = '4': should be auto or a number of tokens \(at least 8\)",
    ):
        pipeline_config.load_config(overrides={"model.max_seq_length": "4"})
    with pytest.raises(
        pipeline_config.ConfigError, match=r"= 'long': should be auto or a number of tokens \(at least 8\)"
    ):
        pipeline_config.load_config(overrides={"model.max_seq_length": "long"})
    head_tail = pipeline_config.load_config(overrides={"model.long_texts": "head_tail", "model.head_share": "0.5"})
    assert head_tail.model.kept_head_share == 0.5 and pipeline_config.load_config().model.kept_head_share is None
    with pytest.raises(pipeline_config.ConfigError, match="a pair's texts are cut longest first"):
        pipeline_config.load_config(overrides={"model.long_texts": "head_tail", "dataset.text_pair_column": "b"})


def test_windows_take_a_stride_share_and_a_count_and_refuse_pairs():
    windows = pipeline_config.load_config(overrides={"model.long_texts": "windows", "model.max_windows": "6"})
    assert windows.model.windows == (0.5, 6) and pipeline_config.load_config().model.windows is None
    with pytest.raises(ValueError, match="max_windows is still auto"):
        _ = pipeline_config.load_config(
            overrides={"model.long_texts": "windows"}
        ).model.windows  # the preflight resolves it
    with pytest.raises(
        pipeline_config.ConfigError,
        match=r"model.max_windows = '0': should be auto or a number of windows \(at least 1\)",
    ):
        pipeline_config.load_config(overrides={"model.max_windows": "0"})
    with pytest.raises(pipeline_config.ConfigError, match=r"model.window_stride = 1.5"):
        pipeline_config.load_config(overrides={"model.window_stride": 1.5})
    with pytest.raises(pipeline_config.ConfigError, match="windowing one of them would answer for fragments"):
        pipeline_config.load_config(overrides={"model.long_texts": "windows", "dataset.text_pair_column": "b"})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"tuning.search": {"seed": [1, 2]}}, "'seed' is not a training key a search can vary"),
        ({"tuning.search": {"batch_size": [0, 16]}}, "batch_size: 0 is not a value training.batch_size takes"),
        ({"tuning.search": {"learning_rate": {"min": 1e-3, "max": 1e-4}}}, "min 0.001 should be below max 0.0001"),
        ({"tuning.search": {"learning_rate": {"min": 0, "max": 1e-4}}}, "a log scale needs min > 0"),
        ({"tuning.search": {"learning_rate": 3e-5}}, "should be {min, max, scale} or a list of choices"),
        ({"tuning.trials": 2, "tuning.parallel_trials": 3}, "parallel_trials 3 is more than the 2 trials"),
    ],
)
def test_a_search_is_checked_against_the_training_section_before_anything_runs(overrides, message):
    with pytest.raises(pipeline_config.ConfigError, match=re.escape(message)):
        pipeline_config.load_config(overrides=overrides)
    tuned = pipeline_config.load_config(
        overrides={"tuning.trials": 6, "tuning.search": {"batch_size": {"min": 8, "max": 64}}}
    )
    assert tuned.tuning.enabled and tuned.tuning.search["batch_size"].integers
    assert "6 trials (bayesian) over learning_rate 1e-05-0.0002 (log), batch_size 8-64 (log)" in tuned.tuning.describe()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"pipeline_name": "reviews_v2"}, r"cannot name Vertex jobs and labels.*e\.g\. 'reviews-v2'"),
        ({"pipeline_name": "Reviews"}, "cannot name Vertex jobs"),  # Vertex job ids and labels are lowercase
        ({"pipeline_name": "r" * 49}, "at most 48 characters"),  # + '-span-<n>-try-<k>' fits a job id and a label
        ({"pipeline_name": 'a" OR labels.x="y'}, "cannot name Vertex jobs"),  # it is interpolated into a filter
        ({"model_name": "../elsewhere"}, "not one folder name"),
        ({"model_name": "a/b"}, "not one folder name"),
    ],
)
def test_names_that_reach_job_ids_labels_filters_and_paths_are_checked_at_load(overrides, message):
    with pytest.raises(pipeline_config.ConfigError, match=message):
        pipeline_config.load_config(overrides=overrides)
    assert pipeline_config.load_config(overrides={"pipeline_name": "reviews-v2", "model_name": "reviews_v2.1"})


@pytest.mark.parametrize(
    ("overrides", "kind"),
    [
        ({"dataset.builder_options": {"token": "anything-at-all"}}, "an option named like a credential"),
        ({"dataset.builder_options": {"storage_api_key": "k-123"}}, "an option named like a credential"),
        ({"dataset.name": "https://reader:s3cret@data.example.com/reviews.csv"}, "a password in a URL"),
        ({"model.name": "hf_" + "a1B2" * 9}, "a Hugging Face token"),
        ({"cloud.labels": {"team": "AKIA" + "ABCDEFGHIJKLMNOP"}}, "an AWS access key"),
        ({"dataset.split_files": {"train": ["gs://b/x.csv?key=AIza" + "x" * 35]}}, "a Google API key"),
        ({"dataset.name": "https://storage.googleapis.com/b/x.csv?X-Goog-Signature=ab12"}, "a signed URL"),
        ({"dataset.name": "https://a.blob.core.windows.net/c/x.csv?sv=2024&sig=abc%2Bdef"}, "an Azure SAS token"),
        ({"dataset.name": "https://data.example.com/x.csv?access_token=opaque123"}, "an access token in a URL"),
        ({"dataset.name": "https://data.example.com/x.csv#access_token=opaque123"}, "an access token in a URL"),
        (
            {"dataset.name": "https://storage.googleapis.com/b/x.csv?GoogleAccessId=sa@p.iam&Expires=1&Signature=a%2B"},
            "a signed URL",
        ),
        ({"dataset.name": "https://b.s3.amazonaws.com/x.csv?AWSAccessKeyId=A&Expires=1&Signature=c"}, "a signed URL"),
    ],
)
def test_values_that_look_like_credentials_are_refused_at_load(overrides, kind):
    with pytest.raises(pipeline_config.ConfigError, match=re.escape(kind)) as refused:
        pipeline_config.load_config(overrides=overrides)
    assert "Secret Manager (hub.token_secret" in str(refused.value)


def test_compile_refuses_a_credential_before_writing_a_spec(tmp_path, capsys):
    from pipeline import cli

    profile = (pipeline_config.Path(__file__).parents[2] / "configs" / "vertex.yaml").read_text()
    config = tmp_path / "leaky.yaml"
    config.write_text(profile.replace("dataset:\n", "dataset:\n  builder_options: {password: hunter2}\n", 1))
    output = tmp_path / "pipeline.yaml"
    assert cli.main(["compile", "--config", str(config), "--output", str(output)]) == 2
    assert "dataset.builder_options.password holds what looks like" in capsys.readouterr().err
    assert not output.exists()
    # an option named like a credential but left empty, and other options, are fine
    assert pipeline_config.load_config(overrides={"dataset.builder_options": {"token": "", "split": "train"}})


@pytest.mark.parametrize("endpoint", ["http://hub.example.com", "ftp://hub.example.com", "http://10.0.0.5:8080"])
def test_a_hub_endpoint_that_would_get_the_token_in_clear_is_refused(endpoint):
    with pytest.raises(pipeline_config.ConfigError, match="would receive the Hub token unencrypted"):
        pipeline_config.load_config(overrides={"hub.endpoint": endpoint})
    for fine in ("https://hub.example.com", "http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:2"):
        assert pipeline_config.load_config(overrides={"hub.endpoint": fine}).hub.endpoint == fine

"""The bad-input catalogue: each case fails before any expensive work, naming the problem and the fix.

Run through `load_config` and the preflight's model and data checks (then the choices made from them), the same
code `hftfx run` runs first.
"""

import json
import re
import shutil

import datasets
import pytest

from components.example_gen.sources import DatasetSourceError
from components.example_gen.splitting import DatasetContentError
from models.encoders.from_folder import UnsupportedModelError, WeightsError
from models.hub.pretrained import ModelFilesError
from models.tokenizers.tokenizer import UnsupportedTokenizerError
from pipeline.config import pipeline_config
from pipeline.orchestration import preflight
from pipeline.orchestration.choose import choose
from pipeline.orchestration.preflight import check_model_and_data


def checked_and_chosen(config):
    """What `hftfx run` does with the model and the data before any component: check, then choose."""
    return choose(check_model_and_data(config))


def _csv(tmp_path, rows, name="data.csv"):
    path = tmp_path / name
    datasets.Dataset.from_dict({"text": [r[0] for r in rows], "label": [r[1] for r in rows]}).to_csv(path)
    return path


def _config(tmp_path, model_dir, **dataset):
    return pipeline_config.load_config(
        overrides={
            "model.name": str(model_dir),
            "pipeline_root": str(tmp_path / "root"),
            "serving_dir": str(tmp_path / "serve"),
            **{f"dataset.{k}": v for k, v in dataset.items()},
        }
    )


def _balanced(n=40):
    return [(f"good film {i}", "pos") if i % 2 else (f"bad film {i}", "neg") for i in range(n)]


def test_unknown_hub_dataset(tmp_path, tiny_bert_dir):
    with pytest.raises(DatasetSourceError, match="no-such-user/no-such-dataset"):
        checked_and_chosen(_config(tmp_path, tiny_bert_dir, name="no-such-user/no-such-dataset"))


def test_missing_local_files(tmp_path, tiny_bert_dir):
    with pytest.raises(DatasetSourceError, match=r"data_files not found: \[.*missing.csv"):
        checked_and_chosen(_config(tmp_path, tiny_bert_dir, name="csv", data_files=[str(tmp_path / "missing.csv")]))


@pytest.mark.parametrize(
    ("column", "message"), [("text_column", "text column 'review'"), ("label_column", "label column 'review'")]
)
def test_missing_columns_list_the_real_ones(tmp_path, tiny_bert_dir, column, message):
    path = _csv(tmp_path, _balanced())
    config = _config(tmp_path, tiny_bert_dir, name="csv", data_files=[str(path)], **{column: "review"})
    with pytest.raises(DatasetContentError, match=rf"{message}.*\['text', 'label'\]"):
        checked_and_chosen(config)


def test_empty_split(tmp_path, tiny_bert_dir):
    empty = tmp_path / "empty.csv"
    empty.write_text("text,label\n")
    split_files = {"train": [str(_csv(tmp_path, _balanced()))], "test": [str(empty)]}
    config = _config(tmp_path, tiny_bert_dir, name="csv", split_files=split_files)
    with pytest.raises(DatasetContentError, match=r"split 'test' \(dataset split 'test'\) is empty"):
        checked_and_chosen(config)


def test_single_class_split(tmp_path, tiny_bert_dir):
    rows = [(f"good film {i}", "pos") for i in range(30)] + [("bad film", "neg")]
    config = _config(tmp_path, tiny_bert_dir, name="csv", data_files=[str(_csv(tmp_path, rows))], seed=1)
    with pytest.raises(DatasetContentError, match=r"holds a single class \('pos'\)"):
        checked_and_chosen(config)


def test_labels_outside_the_declared_set(tmp_path, tiny_bert_dir):
    rows = [*_balanced(), ("meh film", "neutral")]
    config = _config(
        tmp_path, tiny_bert_dir, name="csv", data_files=[str(_csv(tmp_path, rows))], label_names=["neg", "pos"]
    )
    with pytest.raises(DatasetContentError, match=r"outside the label set \['neg', 'pos'\]: \['neutral'\]"):
        checked_and_chosen(config)


def test_non_string_text(tmp_path, tiny_bert_dir):
    path = tmp_path / "numbers.json"
    path.write_text("\n".join(json.dumps({"text": i, "label": "pos" if i % 2 else "neg"}) for i in range(20)))
    config = _config(tmp_path, tiny_bert_dir, name="json", data_files=[str(path)])
    with pytest.raises(DatasetContentError, match="not strings"):
        checked_and_chosen(config)


def test_missing_text_values(tmp_path, tiny_bert_dir):
    path = tmp_path / "gaps.json"
    path.write_text("\n".join(json.dumps({"text": None if i == 7 else f"t{i}", "label": i % 2}) for i in range(40)))
    config = _config(tmp_path, tiny_bert_dir, name="json", data_files=[str(path)])
    with pytest.raises(DatasetContentError, match=r"missing values: text in 1 row\(s\).*--missing-text drop"):
        checked_and_chosen(config)


def test_non_utf8_bytes(tmp_path, tiny_bert_dir):
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"text,label\n" + "café crème,pos\n".encode("latin-1") + b"plain,neg\n" * 20)
    config = _config(tmp_path, tiny_bert_dir, name="csv", data_files=[str(path)])
    with pytest.raises(DatasetSourceError, match=r"is not UTF-8 text \(byte b'\\xe9'.*re-encode"):
        checked_and_chosen(config)


def test_text_that_is_not_valid_unicode(tmp_path, tiny_bert_dir):
    path = tmp_path / "surrogates.json"
    lines = [json.dumps({"text": f"t{i}", "label": i % 2}) for i in range(40)]
    lines[5] = '{"text": "broken \\ud800 surrogate", "label": 1}'
    path.write_text("\n".join(lines))
    config = _config(tmp_path, tiny_bert_dir, name="json", data_files=[str(path)])
    with pytest.raises(DatasetSourceError, match=r"could not be read: .*surrogate pair in string is invalid. in row 5"):
        checked_and_chosen(config)


def test_empty_and_whitespace_texts_are_kept_and_defined(tmp_path, tiny_bert_dir):
    # (A CSV reader turns an empty field into a missing value, refused above; JSON keeps "".)
    rows = [*_balanced(200), ("", "pos"), ("   ", "neg"), ("\t\n", "pos")]
    path = tmp_path / "blank.json"
    path.write_text("\n".join(json.dumps({"text": t, "label": lab}) for t, lab in rows))
    result = checked_and_chosen(_config(tmp_path, tiny_bert_dir, name="json", data_files=[str(path)]))
    assert sum(result.split_sizes.values()) == len(rows), "the sample held every row: sizes are exact"


def test_max_seq_length_over_the_position_limit(tmp_path, tiny_bert_dir):
    config = pipeline_config.load_config(overrides={"model.name": str(tiny_bert_dir), "model.max_seq_length": 512})
    with pytest.raises(pipeline_config.ConfigError, match="over the model's position limit 128"):
        checked_and_chosen(config)


@pytest.mark.parametrize(
    ("removed", "named"),
    [(("vocab.txt", "tokenizer.json"), "the tokenizer"), (("config.json",), "config.json"),
     (("model.safetensors",), "model.safetensors")],
)  # fmt: skip
def test_model_directory_missing_a_file(tmp_path, tiny_bert_dir, removed, named):
    copy = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, copy)
    for name in removed:
        (copy / name).unlink()
    with pytest.raises(ModelFilesError, match=named.replace(".", r"\.")):
        checked_and_chosen(pipeline_config.load_config(overrides={"model.name": str(copy)}))


def test_non_wordpiece_tokenizer(tmp_path, tiny_bert_dir):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    copy = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, copy)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (copy / name).unlink(missing_ok=True)
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train_from_iterator(["some words for a byte pair model"] * 5, trainers.BpeTrainer(special_tokens=["<unk>"]))
    PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>").save_pretrained(copy)
    with pytest.raises(UnsupportedTokenizerError, match="supports WordPiece"):
        checked_and_chosen(pipeline_config.load_config(overrides={"model.name": str(copy)}))


@pytest.mark.parametrize("key", ["evaluation.min_accuracy", "evaluation.min_auc", "evaluation.max_auc_regression"])
def test_thresholds_outside_unit_interval(key):
    with pytest.raises(pipeline_config.ConfigError, match=rf"{key} = 1.5: should be at most 1 \("):
        pipeline_config.load_config(overrides={key: 1.5})


def test_pipeline_root_that_cannot_be_written(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = pipeline_config.load_config(overrides={"pipeline_root": str(blocker / "root")})
    with pytest.raises(pipeline_config.ConfigError, match=r"pipeline_root .* is not writable"):
        preflight.check_paths(config)


def test_serving_dir_that_is_a_file(tmp_path):
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "text_classifier").write_text("not a folder")
    config = pipeline_config.load_config(
        overrides={"pipeline_root": str(tmp_path / "root"), "serving_dir": str(tmp_path / "serving")}
    )
    with pytest.raises(pipeline_config.ConfigError, match=r"serving_dir .* is a file, not a folder"):
        preflight.check_paths(config)


def test_cli_turns_bad_input_into_a_message_and_exit_code_2(tmp_path, capsys):
    from pipeline.cli import main

    code = main(
        [
            "run",
            "--dataset",
            "csv",
            "--data-files",
            str(tmp_path / "none.csv"),
            "--pipeline-root",
            str(tmp_path / "root"),
            "--serving-dir",
            str(tmp_path / "s"),
        ]
    )
    assert code == 2
    assert "data_files not found" in capsys.readouterr().err


def test_a_report_before_any_run_says_to_run_one_first(tmp_path, capsys):
    from pipeline.cli import main

    code = main(["report", "--set", f"pipeline_root={tmp_path / 'root'}"])
    assert code == 2
    assert f"under {tmp_path / 'root'}; run one first" in capsys.readouterr().err
    assert not (tmp_path / "root" / "reports").exists()


def test_the_preflight_reads_a_bounded_sample_and_leaves_the_rest_to_the_example_gen(
    tmp_path, tiny_bert_dir, monkeypatch, run_example_gen
):
    """Past the sample the preflight reports no sizes and finds undeclared labels with one Beam pass over the label
    column; a bad row it did not read stops the ExampleGen, which names its file and row."""
    from components.example_gen import dataset_pass

    monkeypatch.setattr(dataset_pass, "SAMPLE", dataset_pass.RowBudget(10, 30.0))
    rows = _balanced(60)
    rows[45] = (None, "pos")
    result = checked_and_chosen(_config(tmp_path, tiny_bert_dir, name="csv", data_files=[str(_csv(tmp_path, rows))]))
    assert result.split_sizes is None and result.sampled_rows == 10
    assert result.config.dataset.label_names == ("neg", "pos")
    assert "rows sampled" in result.describe()
    with pytest.raises(Exception, match=r"missing values: text in 1 row\(s\), first row 45 of data.csv"):
        run_example_gen(tmp_path, result.config.dataset)


def _t5_folder(directory, family_model_dir):
    """A T5 folder as the hub lays it out: a SentencePiece tokenizer the in-graph tokenizer reads, an
    encoder-decoder architecture no encoder of ours computes."""
    import transformers

    directory.mkdir()
    shutil.copy(family_model_dir("deberta-v2") / "spm.model", directory / "spiece.model")
    transformers.T5TokenizerFast.from_pretrained(directory).save_pretrained(directory)
    transformers.T5Config(d_model=32, num_layers=1, num_heads=2, d_ff=64, d_kv=16).save_pretrained(directory)
    return directory


def test_an_architecture_without_an_encoder_of_ours_is_refused_before_any_component(tmp_path, family_model_dir):
    model = _t5_folder(tmp_path / "t5", family_model_dir)  # and no weights: the architecture is the reason
    with pytest.raises(UnsupportedModelError, match=r"'t5' model, which cannot be fine-tuned.*ModernBERT"):
        checked_and_chosen(pipeline_config.load_config(overrides={"model.name": str(model)}))


def test_roberta_style_positions_start_after_the_padding_id(family_model_dir):
    """max_position_embeddings 130 with pad id 1: RoBERTa's embeddings number positions 2.., so 128 fit."""
    model = family_model_dir("roberta")
    with pytest.raises(pipeline_config.ConfigError, match="over the model's position limit 128; use at most 128"):
        checked_and_chosen(
            pipeline_config.load_config(overrides={"model.name": str(model), "model.max_seq_length": 130})
        )


def test_the_tokenizer_is_checked_before_the_weights(tmp_path, family_model_dir):
    """A SentencePiece folder missing its tokenizer files (tokenizer.json and the .model) and its weights is told
    about the tokenizer first: the reason a user must fix before anything else can run."""
    copy = shutil.copytree(family_model_dir("xlm-roberta"), tmp_path / "model")
    (copy / "sentencepiece.bpe.model").unlink()
    (copy / "tokenizer.json").unlink()
    (copy / "model.safetensors").unlink()
    with pytest.raises(ModelFilesError, match=r"the tokenizer in .* has no vocabulary file"):
        checked_and_chosen(pipeline_config.load_config(overrides={"model.name": str(copy)}))


def test_compile_runs_the_model_preflight(tmp_path, family_model_dir):
    """`hftfx compile` refuses a model the cloud run could not train, before writing a spec, exit 2."""
    import subprocess
    import sys

    model = _t5_folder(tmp_path / "t5", family_model_dir)
    output = tmp_path / "pipeline.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "compile", "--config", "configs/vertex.yaml",
         "--set", f"model.name={model}", "--output", str(output)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert "'t5' model, which cannot be fine-tuned here" in done.stderr and not output.exists()


def test_funnel_which_transformers_5_computes_only_in_pytorch_is_refused_with_the_families_that_work(family_model_dir):
    """Funnel trained as transformers 4.57's TF class until transformers dropped TensorFlow; no encoder of ours
    computes it: refused before any component, the message naming the families that do."""
    with pytest.raises(UnsupportedModelError, match=r"'funnel' model, which cannot be fine-tuned here.*ModernBERT"):
        checked_and_chosen(pipeline_config.load_config(overrides={"model.name": str(family_model_dir("funnel"))}))


def test_a_tf_only_checkpoint_is_refused_with_the_conversion(tmp_path, tiny_bert_dir):
    """tf_model.h5 is transformers 4's TensorFlow format, which no loader here reads: the message gives the
    command that converts it."""
    copy = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    (copy / "model.safetensors").rename(copy / "tf_model.h5")
    with pytest.raises(ModelFilesError, match=r"tf_model\.h5 is not read.*from_tf=True"):
        checked_and_chosen(pipeline_config.load_config(overrides={"model.name": str(copy)}))


def test_float_scores_are_refused_at_preflight_as_regression(tmp_path, tiny_bert_dir):
    """An STS-B-like file (similarity scores 0-5 in steps of 0.2) is refused before any component instead of
    becoming 26 classes."""
    rows = [(f"pair of sentences {i}", round((i % 26) * 0.2, 1)) for i in range(200)]
    config = _config(tmp_path, tiny_bert_dir, name=str(_csv(tmp_path, rows)))
    with pytest.raises(DatasetContentError, match=r"'label' holds numbers with fractions .* regression"):
        checked_and_chosen(config)


def _jsonl(tmp_path, rows, name="tags.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_malformed_multi_label_rows_are_refused_at_preflight_naming_the_row(tmp_path, tiny_bert_dir):
    """A JSON-lines row whose tags are a bare string among lists is named by the reader itself; a file declared
    multi-label whose rows hold single labels is named by the ExampleGen's own row check; both in seconds."""
    import time

    rows = [{"text": f"text {i}", "label": [["a"], ["b"], ["a", "b"], []][i % 4]} for i in range(200)]
    rows[37]["label"] = "a"
    started = time.monotonic()
    with pytest.raises(DatasetSourceError, match=r"Column\(/label\) changed from array to string in row 37"):
        checked_and_chosen(_config(tmp_path, tiny_bert_dir, name=str(_jsonl(tmp_path, rows))))
    declared = _config(tmp_path, tiny_bert_dir, name=str(_csv(tmp_path, _balanced())), multi_label=True)
    with pytest.raises(
        DatasetContentError, match=r"holds 'neg' \(row 0 of data.csv \('train'\)\), not a list of labels"
    ):
        checked_and_chosen(declared)
    assert time.monotonic() - started < 30


def test_multi_label_settings_are_checked_against_the_task_found(tmp_path, tiny_bert_dir):
    rows = [{"text": f"text {i}", "label": [["a"], ["b"], ["a", "b"], []][i % 4]} for i in range(200)]
    path = str(_jsonl(tmp_path, rows))
    probed = checked_and_chosen(_config(tmp_path, tiny_bert_dir, name=path))
    assert probed.config.dataset.multi_label and probed.config.dataset.label_names == ("a", "b")
    single = [{"text": f"text {i}", "label": "ab"[i % 2]} for i in range(200)]
    single_path = str(_jsonl(tmp_path, single, "single.jsonl"))

    def with_thresholds(name, thresholds):
        values = _config(tmp_path, tiny_bert_dir, name=name).model_dump(mode="json")
        return pipeline_config.load_config(overrides={**values, "evaluation": {"decision_thresholds": thresholds}})

    with pytest.raises(pipeline_config.ConfigError, match="decision_thresholds is for multi-label tasks"):
        checked_and_chosen(with_thresholds(single_path, {"a": 0.3}))
    with pytest.raises(pipeline_config.ConfigError, match=r"decision_thresholds names \['c'\]"):
        checked_and_chosen(with_thresholds(path, {"c": 0.3}))


def test_a_config_typo_exits_2_before_tensorflow_or_tfx_load():
    """`hftfx run` validates the config first: a pure config error costs no TensorFlow / TFX import."""
    import subprocess
    import sys

    script = (
        "import sys; from pipeline.cli import main; code = main(['run', '--epochs', '0']); "
        "print(code, sorted(m for m in ('tensorflow', 'tfx', 'apache_beam') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.strip().splitlines()[-1] == "2 []", done.stdout + done.stderr[-2000:]
    assert "training.epochs = '0': should be auto or a number of epochs (at least 1) (passes over" in done.stderr


@pytest.mark.parametrize(
    ("epochs", "advice"),
    [(3, "give it epochs (--epochs 10: this run has 3 at most)"), ("auto", "this run's 10 epochs leave it room")],
)
def test_long_texts_and_few_examples_get_the_plateaus_recipe_and_are_warned_of_what_the_run_lacks(
    tmp_path, epochs, advice
):
    # pages of 500 words, 40 of them, read to 512 tokens: the plateau's case. Auto lowers a small encoder's 1e-4 to
    # 3e-5 and gives 10 epochs; the warning names more epochs only where the config set fewer
    from tests.tiny_model import write_tiny_bert

    model_dir = write_tiny_bert(tmp_path / "bert-512", max_position_embeddings=512)
    rows = [(" ".join(f"{text} plot {k}" for k in range(100)), label) for text, label in _balanced()]
    config = _config(tmp_path, model_dir, name="csv", data_files=[str(_csv(tmp_path, rows))])
    config = config.model_copy(update={"training": config.training.model_copy(update={"epochs": epochs})})
    chosen = checked_and_chosen(config)
    lines = chosen.lines()
    (warning,) = [line for line in lines if "few examples" in line and line.startswith("warning: ")]
    assert warning.startswith("warning: long texts (median ") and warning.endswith(advice)
    assert chosen.recipe.learning_rate == 3e-5 and chosen.config.training.learning_rate == "auto", (
        "the Trainer receives auto and chooses the rate from its own train split, the same way"
    )
    (recipe,) = [line for line in lines if line.startswith("recipe: ")]
    assert "a small encoder: the rate the default run was tuned at, lowered to 3e-05 for long texts" in recipe
    assert chosen.epoch_choice.epochs == (10 if epochs == "auto" else 3)


def test_run_check_runs_the_preflight_and_stops_before_the_first_component(tmp_path, tiny_bert_dir, capsys):
    from pipeline.cli import main

    path = _csv(tmp_path, _balanced())
    root, serve = tmp_path / "root", tmp_path / "serve"
    args = ["run", "--check", "--model", str(tiny_bert_dir), "--dataset", str(path)]
    args += ["--pipeline-root", str(root), "--serving-dir", str(serve)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "check passed" in out and all(
        f" {step}" in out for step in ("Transform,", "Trainer,", "Evaluator,", "Pusher")
    )
    # the width auto chose from the training texts' own lengths ("[CLS] good film 12 [SEP]": 5 tokens), its cost
    assert "lengths: 34 sampled texts: median 5, p90 5, p99 5, max 5 tokens; max_seq_length 16 (auto: " in out
    assert "0.0% of texts cut; batch widths " in out and "of the trained tokens are padding" in out
    assert "s per epoch of " in out and "GFLOP/s fp32)" in out
    assert "epochs: at most 10 epoch(s) (auto: 34 train examples: 10 passes, the most auto chooses); early " in out
    # a test split of a few rows: its numbers mean little, said before anything trains, with the fix
    assert re.search(r"warning: the test split holds \d examples: a 95% interval on its accuracy is up to ±0\.\d+", out)
    assert "give it at least 385 examples and 30 of each label (dataset.split_ratios" in out
    assert "will be cut" not in out
    assert not (root / "metadata.sqlite").exists() and list(root.iterdir()) == []
    assert main([*args, "--max-seq-length", "130"]) == 2  # knowable from the model's files: refused by the check
    assert "over the model's position limit 128" in capsys.readouterr().err


def test_run_check_says_before_training_that_most_texts_will_be_cut_and_what_to_do(tmp_path, tiny_bert_dir, capsys):
    """Speech-long texts and a model of 128 positions: auto stops at the limit, and the check says what is cut."""
    from pipeline.cli import main

    speeches = [(" ".join(["the people of this nation"] * (40 + i)), "pos" if i % 2 else "neg") for i in range(40)]
    args = ["run", "--check", "--model", str(tiny_bert_dir), "--dataset", str(_csv(tmp_path, speeches))]
    # 31 training speeches: a batch of 16 (the default 32 is more than the split holds, refused by the check)
    args += ["--pipeline-root", str(tmp_path / "root"), "--serving-dir", str(tmp_path / "serve"), "--batch-size", "16"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "max_seq_length 128 (auto: the model's position limit; 99% of the texts need 400)" in out
    assert "warning: 100% of the training texts are longer than 128 tokens and will be cut: the model holds" in out
    assert "or keep each text's start and end (--long-texts head_tail)" in out
    assert main([*args, "--max-seq-length", "64"]) == 0
    out = capsys.readouterr().out
    assert "max_seq_length 64 (set in the config): 100.0% of texts cut" in out
    assert "will be cut: raise model.max_seq_length (or set it to auto)" in out
    assert main([*args, "--long-texts", "windows"]) == 0  # all of each speech, in windows of the model's 128
    out = capsys.readouterr().out
    assert re.search(
        r"windows: at most (\d+) per text \(auto: 99% of the texts whole\), 126 text tokens each, 63 apart", out
    )
    assert "0.0% of texts cut" in out.split("windows:")[1] and "will be cut" not in out


@pytest.mark.slow  # writes a 418 MB BERT-base-shaped folder (17 s) before the check
def test_run_check_gives_a_base_size_bert_its_rate_and_clipping_before_anything_trains(tmp_path, capsys):
    """A 12-layer, 768-wide BERT-family folder laid out as the hub lays it out: the check prints a rate within
    BERT's fine-tuning grid and global-norm clipping, chosen from its config.json, and why."""
    import shutil

    from transformers import BertConfig

    from models.hub.pretrained import packaged_model_dir
    from pipeline.cli import main
    from tests.tiny_model import TOKENIZER_FILES, write_random_checkpoint

    folder = tmp_path / "bert-base"
    write_random_checkpoint(BertConfig(architectures=["BertModel"]).to_dict(), folder)
    for name in TOKENIZER_FILES:
        shutil.copy(packaged_model_dir("all-MiniLM-L6-v2") / name, folder / name)
    reviews = [(f"a review number {i} of a film", "pos" if i % 2 else "neg") for i in range(200)]
    args = ["run", "--check", "--model", str(folder), "--dataset", str(_csv(tmp_path, reviews))]
    assert main([*args, "--pipeline-root", str(tmp_path / "root"), "--serving-dir", str(tmp_path / "serve")]) == 0
    out = capsys.readouterr().out
    rate = float(re.search(r"recipe: learning rate ([0-9.e-]+),", out)[1])
    assert rate <= 5e-5 and "gradients clipped at global norm 1" in out
    assert "chosen for a bert encoder with 85M parameters in its layers: a base-size encoder" in out


def _csv_with(tmp_path, column: str, values) -> str:
    rows = _balanced(len(values))
    path = tmp_path / "sliced.csv"
    datasets.Dataset.from_dict(
        {"text": [r[0] for r in rows], "label": [r[1] for r in rows], column: list(values)}
    ).to_csv(path)
    return str(path)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            ["de", "en"] * 30,
            r"slice column\(s\) \['language'\] not in split 'train'; its columns are \['text', 'label', 'lang'\]",
        ),
        (
            [None] * 60,
            r"slice column 'language' has no value in the 60 rows read.*take it out of evaluation.slice_columns",
        ),
        (
            [i * 0.37 for i in range(60)],
            r"slice column 'language' holds more than 50 distinct values in the 60 rows read, numbers with fractions"
            r" \(a measurement\).*Bucket it into at most 50 named ranges.*'language_band'",
        ),
        ([f"user-{i}" for i in range(60)], r"more than 50 distinct values .* an identifier-like column"),
    ],
    ids=["absent", "all missing", "float measurement", "identifier"],
)
def test_a_slice_column_that_cannot_slice_is_refused_before_any_component(tmp_path, tiny_bert_dir, values, message):
    column = "lang" if message.startswith("slice column\\(s\\)") else "language"
    config = pipeline_config.load_config(
        overrides={
            "model.name": str(tiny_bert_dir),
            "pipeline_root": str(tmp_path / "root"),
            "serving_dir": str(tmp_path / "serve"),
            "dataset.name": "csv",
            "dataset.data_files": [_csv_with(tmp_path, column, values)],
            "evaluation.slice_columns": ["language"],
        }
    )
    with pytest.raises(DatasetContentError, match=message):
        preflight.preflight(config)


def test_slice_columns_are_carried_as_strings_with_missing_values_their_own_slice():
    from components.example_gen.splitting import slice_value

    assert [slice_value(v, "c", "row 1") for v in ("de", 3, 2.0, True, None)] == ["de", "3", "2", "true", "(missing)"]
    with pytest.raises(DatasetContentError, match=r"slice column 'c' holds \['a'\] \(row 1\), not one string"):
        slice_value(["a"], "c", "row 1")


def _with_config(tmp_path, tiny_bert_dir, **changes):
    copy = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, **changes}))
    return copy


def _rewrite_header(copy, change):
    """model.safetensors with its header changed by `change(header) -> header` (its data as it was)."""
    path = copy / "model.safetensors"
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header = change(json.loads(data[8 : 8 + length]))
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + length :])
    return path


# What a refused model folder never loads: the run's machinery comes after its checks (seconds of imports each)
LOADED_AFTER_THE_MODEL_CHECK = ("tfx", "tensorflow_model_analysis", "apache_beam")


def _check_exits_2(copy, tmp_path, *patterns):
    """`hftfx run --check` as a user runs it (the command's entry point in a fresh process): exit 2 within seconds,
    one line naming the file and the fix, and none of TFX, TFMA or Beam imported to get there."""
    import subprocess
    import sys
    import time

    argv = ["run", "--check", "--model", str(copy),
            "--set", f"pipeline_root={tmp_path / 'root'}", "--set", f"serving_dir={tmp_path / 'serve'}"]  # fmt: skip
    script = (
        f"import sys; from pipeline.cli import run_quietly; code = run_quietly({argv!r}); "
        f"print(code, sorted(m for m in {LOADED_AFTER_THE_MODEL_CHECK!r} if m in sys.modules))"
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.strip().splitlines()[-1:] == ["2 []"], done.stdout[-2000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    for pattern in patterns:
        assert re.search(pattern, done.stderr), done.stderr[-2000:]
    return time.monotonic() - started


def test_a_config_of_150b_parameters_beside_a_small_file_is_refused_before_anything_is_built(tmp_path, tiny_bert_dir):
    """--check used to pass it (13 million seconds an epoch) and the Trainer died allocating it."""
    copy = _with_config(
        tmp_path, tiny_bert_dir, hidden_size=12_288, num_hidden_layers=96, intermediate_size=49_152,
        num_attention_heads=96,
    )  # fmt: skip
    declared = r"config\.json declares at least [\d,]+ encoder parameters \(0\.60B\)"
    assert _check_exits_2(copy, tmp_path, declared, "model.safetensors") < 60  # the config's graph is never built


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"hidden_size": 0}, r"hidden size 0 \(our encoders take 1 to"),
        ({"num_hidden_layers": 100_000}, r"layers size 100000 \(our encoders take 1 to 256\)"),
        ({"hidden_size": 65, "num_attention_heads": 2}, "hidden size 65, which 2 attention heads do not divide"),
    ],
)
def test_sizes_out_of_range_are_refused_naming_the_size(tmp_path, tiny_bert_dir, changes, said):
    copy = _with_config(tmp_path, tiny_bert_dir, **changes)
    with pytest.raises(UnsupportedModelError, match=said):
        preflight.check_model(pipeline_config.load_config(overrides={"model.name": str(copy)}))


def test_a_truncated_weights_file_is_refused_naming_it(tmp_path, tiny_bert_dir):
    copy = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    path = copy / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    seconds = _check_exits_2(copy, tmp_path, r"model\.safetensors is truncated", "download the model folder again")
    assert seconds < 60


def test_a_header_whose_shapes_disagree_with_the_config_is_refused(tmp_path, tiny_bert_dir):
    copy = _with_config(tmp_path, tiny_bert_dir, intermediate_size=256)  # the weights were written for 128
    with pytest.raises(WeightsError, match=r"other shapes \['bert\.encoder\.layer\.0\.intermediate"):
        preflight.check_model(pipeline_config.load_config(overrides={"model.name": str(copy)}))


def test_a_99_mb_header_is_refused_unread(tmp_path, tiny_bert_dir):
    copy = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    path = copy / "model.safetensors"
    data = path.read_bytes()
    with open(path, "wb") as file:  # a declared 99 MB header, the file sparse past its first bytes
        file.write((99_000_000).to_bytes(8, "little") + data[8:])
        file.truncate(99_000_008 + len(data))
    _check_exits_2(copy, tmp_path, r"declares a 99,000,000-byte header, over the 8,000,000")


def test_a_2_gb_tensor_no_weight_reads_is_refused_without_being_read(tmp_path, tiny_bert_dir):
    """The file holds it (sparse here: no disk spent), the header says so; nothing reads a byte of it."""
    import resource

    copy = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    end = {}

    def with_junk(header):
        end["data"] = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
        junk = {"dtype": "F32", "shape": [2**29], "data_offsets": [end["data"], end["data"] + 2**31]}
        return {**header, "unused.junk": junk}

    path = _rewrite_header(copy, with_junk)
    with open(path, "r+b") as file:
        file.truncate(path.stat().st_size + 2**31)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(WeightsError, match=r"holds 'unused\.junk' \(2,147,483,648 bytes\).*refused unread"):
        preflight.check_model(pipeline_config.load_config(overrides={"model.name": str(copy)}))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500_000  # KiB: far less than 2 GB


def _overlapping(header):
    """The second tensor's bytes start inside the first's (its span's length kept)."""
    tensors = sorted((v["data_offsets"][0], k) for k, v in header.items() if k != "__metadata__")
    (_, first), (_, second) = tensors[0], tensors[1]
    begin, end = header[second]["data_offsets"]
    shift = begin - header[first]["data_offsets"][0] - 4
    header[second]["data_offsets"] = [begin - shift, end - shift]
    return header


def _as_int32(header):
    header["embeddings.word_embeddings.weight"]["dtype"] = "I32"
    return header


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_overlapping, r"model\.safetensors's tensors '.+' and '.+' overlap \(bytes"),
        (_as_int32, r"holds 'embeddings\.word_embeddings\.weight' as I32, where the model reads .* floating-point"),
    ],
)
def test_a_header_that_reads_bytes_twice_or_as_integers_is_refused(tmp_path, tiny_bert_dir, change, said):
    copy = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    _rewrite_header(copy, change)
    _check_exits_2(copy, tmp_path, said)


def test_a_tokenizer_json_id_past_the_vocabulary_stops_check_before_transformers_reads_it(tmp_path, tiny_bert_dir):
    """An id of 4,000,000,000 took 68 s and 15 GB for transformers to read; each bound of
    models/tokenizers/declared_limits.py is tested beside it."""
    copy = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    declared = json.loads((copy / "tokenizer.json").read_text())
    declared["model"]["vocab"]["zzz"] = 4_000_000_000
    (copy / "tokenizer.json").write_text(json.dumps(declared))
    (copy / "vocab.txt").unlink()
    seconds = _check_exits_2(copy, tmp_path, r"tokenizer\.json: 'zzz' has id 4000000000, outside 0\.\.30,521")
    assert seconds < 60


def test_a_nan_weight_is_named_before_anything_trains(tmp_path, tiny_bert_dir):
    """It trained to NaN from the first step; --check reads every weight the model reads, a tensor at a time."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    copy = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    state = load_file(copy / "model.safetensors")
    state["encoder.layer.1.output.dense.weight"][3, :2] = [np.nan, np.inf]
    save_file(state, copy / "model.safetensors", metadata={"format": "pt"})
    _check_exits_2(copy, tmp_path, r"tensor 'encoder\.layer\.1\.output\.dense\.weight' holds 2 NaN or infinite")


def test_config_json_that_is_not_json_is_named(tmp_path, tiny_bert_dir):
    copy = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    (copy / "config.json").write_text('{"model_type": "bert", ')
    with pytest.raises(ModelFilesError, match=r"config\.json is not JSON"):
        preflight.check_model(pipeline_config.load_config(overrides={"model.name": str(copy)}))


def test_a_tokenizer_json_the_tokenizers_library_cannot_parse_is_named(tmp_path, tiny_bert_dir):
    copy = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    spec = json.loads((copy / "tokenizer.json").read_text())
    del spec["model"]["unk_token"]
    (copy / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(ModelFilesError, match=r"cannot read the tokenizer in .*missing field `unk_token`"):
        preflight.check_model(pipeline_config.load_config(overrides={"model.name": str(copy)}))


def test_serving_a_folder_with_no_savedmodel_is_one_line_naming_it(tmp_path):
    import subprocess
    import sys

    (tmp_path / "not-a-model").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "serve", "--model", str(tmp_path / "not-a-model")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "not-a-model holds no SavedModel (saved_model.pb)" in done.stderr
    assert "serving_dir/<model name>" in done.stderr


def test_a_label_column_of_ids_stops_check_naming_the_count_column_and_setting(tmp_path, tiny_bert_dir, capsys):
    """100,000 rows whose label is each row's own id: refused as soon as the label set is known, before any split,
    metric or model is built for it (it took --check to 23 GB and a silent kill)."""
    from pipeline.cli import main

    path = _csv(tmp_path, [(f"text {i}", f"id-{i}") for i in range(100_000)])
    code = main([
        "run", "--check", "--dataset", "csv", "--data-files", str(path), "--model", str(tiny_bert_dir),
        "--pipeline-root", str(tmp_path / "root"), "--serving-dir", str(tmp_path / "s"),
    ])  # fmt: skip
    assert code == 2
    error = capsys.readouterr().err
    assert "label column 'label' has more than dataset.max_labels 1,000 distinct values" in error
    assert "--set dataset.max_labels=N" in error


def test_the_label_limit_is_a_setting(tmp_path, tiny_bert_dir):
    rows = [(f"film {i}", f"genre-{i % 4}") for i in range(80)]
    config = _config(tmp_path, tiny_bert_dir, name="csv", data_files=[str(_csv(tmp_path, rows))], max_labels=3)
    with pytest.raises(DatasetContentError, match=r"more than dataset.max_labels 3 distinct values \(4 found"):
        checked_and_chosen(config)
    config = _config(tmp_path, tiny_bert_dir, name="csv", data_files=[str(_csv(tmp_path, rows))], max_labels=4)
    assert checked_and_chosen(config).config.dataset.label_names == ("genre-0", "genre-1", "genre-2", "genre-3")

"""A tiny BERT (2 layers, hidden 64) with the packaged model's real vocab, for fast pipeline tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from models.hub.pretrained import packaged_model_dir

TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")


def tiny_bert_config(**changes) -> dict:
    """config.json of a tiny BERT as transformers 5's BertConfig writes it (its defaults filled in)."""
    from transformers import BertConfig

    sizes = dict(
        vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_position_embeddings=128,
    )  # fmt: skip
    return BertConfig(**{**sizes, **changes}, architectures=["BertModel"]).to_dict()


def tiny_bert_weight_count(num_labels: int) -> int:
    """Weights of the tiny BERT sequence classifier with `num_labels` outputs (encoder, pooler and head)."""
    from models.encoders import classifier

    return classifier.build(tiny_bert_config(), [str(i) for i in range(num_labels)]).count_params()


def write_random_checkpoint(config: dict, directory: Path, seed: int = 0) -> Path:
    """config.json and a random-weight model.safetensors of a bare encoder (as the hub lays out `BertModel`,
    `AlbertModel`, ...: PyTorch names without the task model's prefix, no classifier), drawn by our encoder's own
    initializers; the parity tests (tests/encoder_parity_test.py) check that encoder against transformers 5."""
    import json

    import tf_keras
    from safetensors.numpy import save_file

    from models.encoders import classifier

    directory.mkdir(parents=True, exist_ok=True)
    tf_keras.utils.set_random_seed(seed)
    model = classifier.build(config, ["0", "1"])
    prefix = next(iter(model.encoder.torch_params())).name.split(".")[0] + "."
    # the encoder's tensors and those of its head the bare model has too (BERT's pooler), without the prefix
    state = {name.removeprefix(prefix): value for name, value in classifier.torch_state(model).items()
             if name.startswith(prefix)}  # fmt: skip
    save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return directory


def write_tiny_bert(directory: Path, seed: int = 0, **config_changes) -> Path:
    """Writes config.json, model.safetensors and the real MiniLM vocab/tokenizer files into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    source = packaged_model_dir("all-MiniLM-L6-v2")
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, directory / name)
    return write_random_checkpoint(tiny_bert_config(**config_changes), directory, seed)


def tiny_overrides(workdir: Path, model_dir: Path, max_seq_length: int, **evaluation) -> dict:
    """Config overrides for a LocalDagRunner run of the tiny BERT under workdir, with thresholds anything meets."""
    return {
        "pipeline_root": str(workdir / "pipeline"),
        "serving_dir": str(workdir / "serving"),
        "model.name": str(model_dir),
        "model.max_seq_length": max_seq_length,
        "training.batch_size": 16,
        "training.epochs": 1,  # auto would pass over a few hundred rows 10 times: a test's time, not its point
        "training.learning_rate": 1e-3,
        "evaluation": {"min_accuracy": 0.0, "min_auc": 0.0, **evaluation},
    }


def tiny_run_command(model_dir: Path, workdir: Path, *extra: str, train: int = 256, python: str = "") -> list[str]:
    """`hftfx run` on a few hundred corpus rows with the tiny BERT and thresholds anything meets; `python`
    names the interpreter (default: this one)."""
    import sys

    return [
        python or sys.executable, "-m", "pipeline.cli", "run", "--model", str(model_dir),
        "--pipeline-root", str(workdir / "root"), "--serving-dir", str(workdir / "serving"),
        "--train-limit", str(train), "--eval-limit", "64", "--test-limit", "96", "--batch-size", "8",
        "--epochs", "1", "--max-seq-length", "32", "--min-accuracy", "0", "--min-auc", "0", *extra,
    ]  # fmt: skip

"""How long the default run should take on this machine, from the matmul peak measured on it.

The training loop's share is its model FLOPs (models/hardware/flops.py over the train split, padded as the Trainer
pads it: at its batch widths, or packed in rows of the width) at the utilization the default run reaches; the rest
of the run (ExampleGen, statistics, Transform, validation and export, Evaluator: Beam and TF on the CPU) is scaled
by the ratio of peaks. Both figures come from the latest default run, as `make bench` recorded it in
default_run.json beside this module (package data: installed images read it too).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

DEFAULT_RUN_FILE = Path(__file__).resolve().parent / "default_run.json"


@dataclasses.dataclass(frozen=True)
class Reference:
    """The default run's figures (fp32, 2 cores): the training loop's model FLOP/s over the matmul peak measured
    in that run, and every other second of the pipeline (the Trainer's validation and export included)."""

    trainer_utilization: float
    peak_gflops: float
    seconds_outside_training: float

    @classmethod
    def read(cls, path: Path = DEFAULT_RUN_FILE) -> Reference:
        if not path.is_file():
            raise RuntimeError(f"no reference figures in {path}: `make bench` writes them from a default run")
        run = json.loads(path.read_text(encoding="utf-8"))
        return cls(run["trainer_utilization"], run["matmul_peak_gflops"], run["seconds_outside_training"])


@dataclasses.dataclass(frozen=True)
class RunEstimate:
    training_flops: float
    trainer_seconds: float
    other_seconds: float
    utilization: float

    @property
    def total_seconds(self) -> float:
        return self.trainer_seconds + self.other_seconds

    def describe(self) -> str:
        return (
            f"default run ~{self.total_seconds / 60:.0f} min of pipeline (training ~{self.trainer_seconds:.0f} s "
            f"for {self.training_flops / 1e12:.0f} TFLOP at {self.utilization:.0%} of peak, the rest "
            f"~{self.other_seconds:.0f} s)"
        )


def padded_widths(token_counts, max_seq_length: int, batch_widths, special_tokens: int = 2) -> list[int]:
    """The width each example is padded to: the smallest of the Trainer's bucket widths that holds it with its
    `special_tokens` (the model's layout: [CLS] text [SEP] for BERT)."""
    from models.training.lengths import bucket_edges

    widths = bucket_edges(max_seq_length, batch_widths)
    tokens = [min(count + special_tokens, max_seq_length) for count in token_counts]
    return [next(w for w in widths if w >= length) for length in tokens]


def padded_shapes(lengths, batch_widths, packed_padding: float | None = None):
    """The texts of `lengths` (a lengths.WidthChoice) as the Trainer pads them: each at the smallest of its
    batch widths that holds it, at most the chosen width; or, where it packs (`packed_padding`: the share of
    padding its rows keep, models.training.packing.PackingChoice.packed_padding), in rows of the chosen width
    (flops.BatchShapes)."""
    from models.hardware.flops import BatchShapes

    shapes = BatchShapes()
    if packed_padding is not None:
        tokens = sum(min(length, lengths.width) for length in lengths.profile.lengths)
        rows = tokens / (lengths.width * (1 - packed_padding))
        shapes.add(batch=rows, width=lengths.width, real_tokens=tokens, texts=len(lengths.profile.lengths))
        return shapes
    for width in padded_widths(lengths.profile.lengths, lengths.width, batch_widths, special_tokens=0):
        shapes.add(batch=1, width=width, real_tokens=0)
    return shapes


def epoch_flops(lengths, examples: int, batch_widths, encoder, packed_padding: float | None = None) -> float:
    """Model FLOPs of one epoch over `examples` texts at `lengths.width`: the sampled texts (`lengths`, a
    models.training.lengths.WidthChoice) padded as the Trainer pads them, scaled to `examples`."""
    sampled = len(lengths.profile.lengths)
    if not sampled:
        return 0.0
    return padded_shapes(lengths, batch_widths, packed_padding).training_flops(encoder) * examples / sampled


def epoch_seconds(
    lengths, examples: int, batch_widths, encoder, peak_gflops: float, packed_padding: float | None = None
) -> float:
    """Seconds one epoch takes on a machine of `peak_gflops`, at the utilization the default run reached."""
    flops = epoch_flops(lengths, examples, batch_widths, encoder, packed_padding)
    return flops / (Reference.read().trainer_utilization * peak_gflops * 1e9)


def config_model_folder(config):
    """The config's model folder, read once (models.encoders.from_folder.ModelFolder), its weights left unread."""
    from models.encoders.from_folder import read_model_folder
    from models.hub.pretrained import resolve_model_dir

    directory = resolve_model_dir(config.model.name, config.model.revision)
    return read_model_folder(directory, weights=False, pooling=config.model.pooling)


def train_split_lengths(config, folder=None):
    """The config's train split (read as the ExampleGen reads it) in the model's tokens, and the max_seq_length
    the run chooses for it (models.training.lengths.WidthChoice over every text, not a sample). Single texts.
    `folder`: the config's model folder where the caller has read it."""
    from components.example_gen.dataset_pass import EVERY_ROW, dataset_pass
    from models.training.lengths import choose_width, token_lengths

    folder = folder or config_model_folder(config)
    rows = dataset_pass(config.dataset, EVERY_ROW).placed.rows["train"]
    profile = token_lengths(folder.directory, rows, folder.position_limit, max_texts=len(rows))
    return choose_width(profile, config.model.max_seq_length, folder.position_limit)


@dataclasses.dataclass(frozen=True)
class TrainingWork:
    flops: float  # every epoch's model FLOPs
    examples: int  # train texts
    epochs: int  # at most: early stopping may end sooner


def default_training_flops(config) -> float:
    return training_work(config).flops


def training_work(config) -> TrainingWork:
    """Model FLOPs the Trainer spends on the config's train split, tokenized in-graph and padded as the
    Trainer pads it, for every epoch."""
    from models.training.epochs import choose_epochs
    from models.training.lengths import choose_buckets
    from models.training.long_and_few import TrainTexts
    from models.training.packing import configured_packing

    folder = config_model_folder(config)
    lengths = train_split_lengths(config, folder)
    texts = len(lengths.profile.lengths)
    buckets = choose_buckets(lengths.profile, lengths.width, config.training.batch_widths)
    windowed = config.model.long_texts == "windows"
    packing = configured_packing(
        config.training, lengths.profile.lengths, lengths.width, buckets.padded_share, windowed=windowed
    )
    shapes = padded_shapes(lengths, buckets.buckets, packing.packed_padding)
    shape = folder.trained_shape(embeddings_trained=not config.training.freeze_embeddings)
    steps = texts // config.training.batch_size
    used = steps * config.training.batch_size / texts  # the last partial batch is dropped
    # at most: early stopping may end sooner; long texts and few examples get more (models/training/long_and_few.py)
    epochs = choose_epochs(config.training.epochs, texts, TrainTexts.of(lengths.profile, texts, lengths.width)).epochs
    return TrainingWork(shapes.training_flops(shape) * used * epochs, texts, epochs)


def trained_parameters(model_dir) -> int:
    """Weights the optimizer updates and several workers all-reduce each step (embeddings included: their
    gradients are made dense, components/trainer/module.py says why), from config.json."""
    from models.encoders.from_folder import read_model_folder

    folder = read_model_folder(Path(model_dir), weights=False)
    embeddings = (folder.config["vocab_size"] + folder.config.get("max_position_embeddings", 0)) * folder.shape.hidden
    return folder.shape.layer_matrix_weights + embeddings


def estimate_default_run(peak_gflops: float, config=None) -> RunEstimate:
    from pipeline.config.pipeline_config import load_config

    reference = Reference.read()
    flops = default_training_flops(config or load_config())
    return RunEstimate(
        training_flops=flops,
        trainer_seconds=flops / (reference.trainer_utilization * peak_gflops * 1e9),
        other_seconds=reference.seconds_outside_training * reference.peak_gflops / peak_gflops,
        utilization=reference.trainer_utilization,
    )

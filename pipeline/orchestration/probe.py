"""A cheap look at the dataset and the model before anything expensive starts.

Finds what the pipeline's shape depends on (the label set) and fails early, with the fix named, on what
would otherwise fail minutes later inside a component. It runs the ExampleGen's dataset pass over a bounded
sample of rows (components/example_gen/dataset_pass.py's SAMPLE), so it costs the same whatever the dataset's size;
when the sample holds the whole dataset it also runs the checks that need every row (empty splits, classes
per split). Full validation of big data is the ExampleGen's and the ExampleValidator's job.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from components.evaluator import module as evaluation
from components.evaluator.config import threshold_per_label
from components.evaluator.noise_aware_gate import small_test_split
from components.example_gen import beam_rows, dataset_pass, sources
from components.example_gen.spans import is_spanned
from components.publisher.hub_push import hub_model_id
from components.tuner.config import Range
from models.hardware.flops import EncoderShape
from models.hub.pretrained import (
    COMMIT,
    check_architecture,
    encoder_shape,
    hub_commit,
    model_files,
    position_limit,
    read_config,
    resolve_model_dir,
)
from models.tokenizers.tokenizer import tokenizer_spec
from models.training.epochs import MAX_AUTO_EPOCHS, MIN_EXAMPLES_SEEN, choose_epochs, choose_patience
from models.training.lengths import (
    AUTO,
    BucketChoice,
    WidthChoice,
    WindowChoice,
    choose_buckets,
    choose_width,
    choose_windows,
    token_lengths,
)
from models.training.recipe import RecipeChoice, choose_recipe
from models.training.warm_start import asks_for_blessed, describe_warm_recipe
from pipeline.config.pipeline_config import ConfigError, PipelineConfig, check_label_settings


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    config: PipelineConfig  # with dataset.label_names filled in, and dataset.span resolved (0 = newest)
    split_sizes: dict[str, int] | None  # exact when the sample held the whole dataset, else None
    sampled_rows: int
    shards: int
    lengths: WidthChoice  # the training texts' token lengths and the max_seq_length chosen from them
    buckets: BucketChoice  # the narrower widths the Trainer cuts batches to, chosen from the same lengths
    windows: WindowChoice | None  # model.long_texts: windows: how the texts are split
    test_labels: dict[str, int] | None  # {label: test examples}, when the sample held the whole dataset
    recipe: RecipeChoice  # learning rate, warm-up and clipping, as set or chosen from the model
    encoder: EncoderShape | None
    window: tuple[int, ...] = ()  # the spans read, for span-versioned data
    input_fingerprint: str = ""  # of the files read; '' for hub and packaged datasets
    model_commit: str | None = None  # the hub model's commit every component reads (config.model.revision)
    architecture: str = ""  # the encoder the model trains as, and what it computes

    def describe_lengths(self) -> str:
        """The token lengths and what the run chose from them (width, windows, buckets), as printed and kept."""
        return "; ".join(part.describe() for part in (self.lengths, self.windows, self.buckets) if part)

    @property
    def train_examples(self) -> int | None:
        """What one epoch trains on, when the sample held the whole dataset: train texts, or their windows."""
        texts = (self.split_sizes or {}).get("train")
        if texts is None or self.windows is None:
            return texts
        return round(texts * len(self.windows.trained.lengths) / max(1, len(self.lengths.profile.lengths)))

    @property
    def trained_lengths(self) -> WidthChoice:
        """The token lengths of what trains: the texts, or with long_texts: windows, their windows (one example per
        window, as many per text as the sample has)."""
        if self.windows is None:
            return self.lengths
        return dataclasses.replace(self.lengths, profile=self.windows.trained)

    def describe_epochs(self) -> str:
        """How many epochs the Trainer will run at most and whether early stopping watches, as far as the sample
        tells; on a sample short of the whole dataset the Trainer chooses from the split it counts."""
        training = self.config.training
        examples = self.train_examples
        if examples is None:
            if training.epochs != AUTO:
                return choose_epochs(training.epochs, 0).describe()
            return (
                f"auto: the Trainer chooses from the train split's size (enough to train on {MIN_EXAMPLES_SEEN:,} "
                f"examples, at most {MAX_AUTO_EPOCHS})"
            )
        epochs = choose_epochs(training.epochs, examples)
        stopping = choose_patience(training.early_stopping, epochs.epochs, self.split_sizes.get("eval", 0) > 0)
        return f"{epochs.describe()}; {stopping.describe(training.early_stopping.metric)}"

    def describe_start(self) -> str:
        """Where the Trainer's weights will start (training.warm_start), and what a warm start changes, with why."""
        training, model = self.config.training, self.config.model
        pretrained = f"the pretrained {model.name}"
        if not asks_for_blessed(training.warm_start, is_spanned(self.config.dataset)):
            why = (
                "never" if training.warm_start == "never" else "auto warm-starts span retrains; this data has no spans"
            )
            return f"{pretrained} (training.warm_start: {why})"
        examples = self.train_examples
        cold = choose_epochs(training.epochs, examples).epochs if examples is not None else None
        recipe = describe_warm_recipe(float(training.learning_rate), cold, training.epochs == AUTO)
        return (
            f"the latest blessed model of this task when the pipeline root holds one of the same encoder "
            f"(training.warm_start: {training.warm_start}), with {recipe}; else {pretrained}"
        )

    def small_test_split(self) -> str | None:
        """Why the test split is too small for its metrics and the blessing gate to mean much, when it is."""
        if self.split_sizes is None or self.test_labels is None:
            return None
        counts = {name: self.test_labels.get(name, 0) for name in self.config.dataset.label_names}
        return small_test_split(counts, self.split_sizes.get("test", 0))

    def describe(self) -> str:
        if self.split_sizes is not None:
            return f"splits {self.split_sizes}"
        return f"{self.shards} shard(s), {self.sampled_rows} rows sampled (split sizes come from the ExampleGen)"


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    directory: Path
    position_limit: int | None  # the longest input its position embeddings hold
    encoder: EncoderShape | None  # its sizes, for FLOP counts (None: no config.json to read them from)
    model_type: str = ""  # config.json's (bert, roberta ...): the family the recipe's warm-up follows
    commit: str | None = None  # a hub model's commit, which every component then reads (None: not a hub model)
    architecture: str = ""  # which path it takes and what its encoder computes (pretrained.Architecture.describe)


def resolve_recipe(config: PipelineConfig, model: ModelFacts) -> tuple[PipelineConfig, RecipeChoice]:
    """The config with its recipe's `auto` settings chosen from the model (models/training/recipe.py), and
    the choice."""
    recipe = choose_recipe(model.encoder, model.model_type, config.training)
    chosen = {
        "learning_rate": recipe.learning_rate,
        "warmup_ratio": recipe.warmup_ratio,
        "gradient_clip_norm": recipe.clip_norm,
    }
    return config.model_copy(update={"training": config.training.model_copy(update=chosen)}), recipe


def with_recipe_chosen(config: PipelineConfig) -> PipelineConfig:
    """The config with no `auto` left in its recipe, chosen from the model's config.json (no weights read): what
    a compiled spec fixes, its learning_rate parameter's default included."""
    training = config.training
    if AUTO not in (training.learning_rate, training.warmup_ratio, training.gradient_clip_norm):
        return config
    return resolve_recipe(config, probe_model(config, weights=False))[0]


def with_model_pinned(config: PipelineConfig) -> PipelineConfig:
    """A hub model's branch or tag resolved to its commit (what a compiled spec fixes, so its components read one
    model however long the schedule runs and whatever is pushed to the repo meanwhile); a commit, a folder or a
    packaged model as they are."""
    name, revision = config.model.name, config.model.revision
    if hub_model_id(name) is None or (revision and COMMIT.fullmatch(revision)):
        return config
    commit = hub_commit(name, resolve_model_dir(name, revision, weights=False))
    return config.model_copy(update={"model": config.model.model_copy(update={"revision": commit})})


def probe_model(config: PipelineConfig, weights: bool = True) -> ModelFacts:
    """The model checks, most fundamental first, so the real reason is named: an architecture with a TF
    sequence-classification class, a tokenizer family the in-graph tokenizer reproduces, the weights (unless `weights`
    is False: compile and submit read only config and tokenizer), max_seq_length within the position limit."""
    directory = resolve_model_dir(config.model.name, config.model.revision, weights=weights)
    shape, model_type, architecture = None, "", ""
    if (directory / "config.json").is_file():
        architecture = check_architecture(directory).describe()
        shape = encoder_shape(directory)  # the Trainer's FLOP meter reads it after building the model
        model_type = read_config(directory).get("model_type", "")
    tokenizer = tokenizer_spec(directory)
    if architecture:
        architecture += f"; {tokenizer.family} tokenizer, in-graph"
    if weights or not (directory / "config.json").is_file():
        model_files(directory)
    limit = position_limit(directory)
    requested = config.model.max_seq_length
    if limit is not None and requested != AUTO and requested > limit:
        raise ConfigError(
            f"model.max_seq_length {requested} is over the model's position limit {limit}; use at most {limit} "
            "(or auto)"
        )
    return ModelFacts(directory, limit, shape, model_type, hub_commit(config.model.name, directory), architecture)


def beam_label_values(beam_args) -> dataset_pass.DistinctLabels:
    """The label column's distinct values from one Beam pass, for a sample short of the whole dataset."""

    def distinct(read: sources.DatasetRead) -> list:
        import apache_beam as beam

        with tempfile.TemporaryDirectory() as scratch:
            return beam_rows.distinct_label_values(beam.Pipeline(argv=list(beam_args)), read, scratch)

    return distinct


def check_training_splits(config: PipelineConfig, sizes: dict[str, int]) -> None:
    """What the Trainer and the Tuner's trials need of the splits, known once the whole dataset is sampled: an
    eval split to stop early or score trials with, and a train split of at least one batch of every batch size
    they may use (windows only add examples)."""
    eval_rows, train_rows = sizes.get("eval", 0), sizes.get("train", 0)
    patience = config.training.early_stopping.patience
    if not eval_rows and patience not in (AUTO, 0):
        raise ConfigError(
            f"training.early_stopping.patience {patience} watches the eval split, which is empty: give the dataset "
            "an eval split (dataset.split_ratios) or set the patience to 0"
        )
    if not eval_rows and config.tuning.enabled:
        raise ConfigError(
            "tuning scores each trial on the eval split, which is empty: give the dataset an eval split "
            "(dataset.split_ratios) or set tuning.trials to 0"
        )
    batch = config.tuning.search.get("batch_size", ()) if config.tuning.enabled else ()
    largest = max([config.training.batch_size, *([batch.max] if isinstance(batch, Range) else batch)])
    replicas = config.training.cpu_replicas  # a global batch spans them
    if train_rows < largest * replicas:
        named = "tuning.search.batch_size" if largest != config.training.batch_size else "training.batch_size"
        raise ConfigError(
            f"the train split has {train_rows} examples, fewer than one batch of {largest * replicas} ({named} "
            f"{largest}{f' x {replicas} CPU replicas' if replicas > 1 else ''}): lower it or add data"
        )


def probe(config: PipelineConfig) -> ProbeResult:
    """Runs the model checks, the ExampleGen's own data checks on a bounded sample (no TFRecords) and builds
    the Evaluator's metrics for the label count found, so no configuration error surfaces after training."""
    model = probe_model(config)
    found = dataset_pass.dataset_pass(config.dataset, dataset_pass.SAMPLE, beam_label_values(config.beam_args))
    read, names, placed, complete = found.read, found.label_names, found.placed, found.complete
    multi_label = read.config.multi_label
    check_label_settings(config, names, multi_label)
    if complete:
        check_training_splits(config, placed.totals())
    thresholds = threshold_per_label(config.evaluation, names) if multi_label else None
    evaluation.check_eval_config(len(names), config.evaluation, thresholds)
    dataset = config.dataset.model_copy(
        update={"label_names": tuple(names), "span": read.config.span, "multi_label": multi_label}
    )
    training_rows = placed.rows.get("train") or [row for rows in placed.rows.values() for row in rows]
    lengths = choose_width(
        token_lengths(model.directory, training_rows), config.model.max_seq_length, model.position_limit
    )
    # A hub model pinned to the commit read here: a push to its repo during the run cannot mix files of two commits
    model_update: dict = {"max_seq_length": lengths.width, **({"revision": model.commit} if model.commit else {})}
    windows, trained = None, lengths.profile
    if config.model.long_texts == "windows":
        windows = choose_windows(lengths.profile, lengths.width, config.model.window_stride, config.model.max_windows)
        model_update["max_windows"], trained = windows.windows.count, windows.trained
    buckets = choose_buckets(trained, lengths.width, config.training.batch_widths)
    chosen = {
        "dataset": dataset,
        "model": config.model.model_copy(update=model_update),
        "training": config.training.model_copy(update={"batch_widths": buckets.buckets}),
    }
    resolved, recipe = resolve_recipe(config.model_copy(update=chosen), model)
    return ProbeResult(
        config=resolved,
        recipe=recipe,
        lengths=lengths,
        buckets=buckets,
        windows=windows,
        encoder=model.encoder,
        split_sizes={name: len(rows) for name, rows in placed.rows.items()} if complete else None,
        test_labels=({names[i]: n for i, n in placed.label_counts().get("test", {}).items()} if complete else None),
        sampled_rows=found.rows_read,
        shards=len(read.shards),
        window=read.window,
        input_fingerprint=read.input_fingerprint,
        model_commit=model.commit,
        architecture=model.architecture,
    )

"""Every `auto` of the config chosen from what the preflight found, and said in one place.

The width (and windows, and the batch widths) from the sample's token lengths, the learning rate, warm-up and
clipping from the model, the epochs and early stopping from the split sizes, where the weights start, the hub
model's commit. `Choices.lines()` is what `hftfx run --check` and the run print; the run summary keeps the same
length and recipe lines. A compiled spec fixes the same choices (with_recipe_chosen, with_model_pinned).
"""

from __future__ import annotations

import dataclasses

from components.evaluator.noise_aware_gate import small_test_split
from components.example_gen.spans import is_spanned
from components.publisher.hub_push import hub_model_id
from models.hardware.flops import EncoderShape
from models.hub.pretrained import COMMIT, hub_commit, resolve_model_dir
from models.training.chance import plateau_risk
from models.training.epochs import MAX_AUTO_EPOCHS, MIN_EXAMPLES_SEEN, EpochChoice, choose_epochs, choose_patience
from models.training.lengths import (
    AUTO,
    BucketChoice,
    LengthProfile,
    WidthChoice,
    WindowChoice,
    choose_buckets,
    choose_width,
    choose_windows,
    token_lengths,
)
from models.training.long_and_few import TrainTexts
from models.training.packing import PackingChoice, configured_packing
from models.training.recipe import RecipeChoice, choose_recipe
from models.training.warm_start import asks_for_blessed, describe_warm_recipe
from pipeline.config.pipeline_config import PipelineConfig
from pipeline.machine.estimate import epoch_seconds
from pipeline.orchestration.preflight import Found, ModelFacts, check_model


@dataclasses.dataclass(frozen=True)
class Choices:
    """Every `auto` of the config chosen, each with the reason, and what it was chosen from."""

    config: PipelineConfig  # every auto chosen; the label set, task kind and span as the preflight found them
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
    block_dropout: float | None = None  # where the encoder can recompute its blocks (classifier.block_dropout)
    packing: PackingChoice | None = None  # whether the Trainer lays each batch's texts end to end in rows

    def describe_lengths(self) -> str:
        """The token lengths and what the run chose from them (width, windows, buckets, packing), as printed and
        kept."""
        parts = (self.lengths, self.windows, self.buckets, self.packing)
        return "; ".join(part.describe() for part in parts if part)

    @property
    def train_examples(self) -> int | None:
        """What one epoch trains on, when the sample held the whole dataset: train texts, or their windows."""
        return train_examples(self.split_sizes, self.lengths, self.windows)

    @property
    def train_texts(self) -> TrainTexts:
        """The trained texts' median length and count (train_texts)."""
        return train_texts(self.split_sizes, self.lengths, self.windows)

    @property
    def epoch_choice(self) -> EpochChoice | None:
        """The Trainer's epochs (training.epochs, or auto's from train_examples), where the sample tells them."""
        examples = self.train_examples
        return None if examples is None else choose_epochs(self.config.training.epochs, examples, self.train_texts)

    @property
    def packed_padding(self) -> float | None:
        """The padding share of the Trainer's packed rows, or None where it does not pack (estimate.padded_shapes)."""
        return self.packing.packed_padding if self.packing else None

    @property
    def trained_lengths(self) -> WidthChoice:
        """The token lengths of what trains: the texts, or with long_texts: windows, their windows (one example per
        window, as many per text as the sample has)."""
        return dataclasses.replace(self.lengths, profile=trained_profile(self.lengths, self.windows))

    def describe_epochs(self) -> str:
        """How many epochs the Trainer will run at most and whether early stopping watches, as far as the sample
        tells; on a sample short of the whole dataset the Trainer chooses from the split it counts."""
        training = self.config.training
        epochs = self.epoch_choice
        if epochs is None:
            if training.epochs != AUTO:
                return choose_epochs(training.epochs, 0).describe()
            return (
                f"auto: the Trainer chooses from the train split's size (enough to train on {MIN_EXAMPLES_SEEN:,} "
                f"examples, at most {MAX_AUTO_EPOCHS})"
            )
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
        cold = choice.epochs if (choice := self.epoch_choice) else None
        recipe = describe_warm_recipe(self.recipe.learning_rate, cold, training.epochs == AUTO)
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

    def lines(self) -> list[str]:
        """What `--check` and the run print of the choices, once, before any component."""
        config = self.config
        spans = f", span {config.dataset.span} (reading spans {list(self.window)})" if self.window else ""
        commit = f" at commit {config.model.revision}" if self.model_commit else ""
        lines = [
            f"dataset '{config.dataset.name}'{spans}: {self.describe()}, labels {list(config.dataset.label_names)}; "
            f"model '{config.model.name}'{commit}",
            *([f"model: {self.architecture}"] if self.architecture else []),
            lengths_with_cost(self),
            f"recipe: {self.recipe.describe()}",
            f"epochs: {self.describe_epochs()}",
            f"start: {self.describe_start()}",
            *([f"tuning: {config.tuning.describe()}"] if config.tuning.enabled else []),
        ]
        if self.encoder is not None:
            lines.extend(memory_lines(self))
        if small := self.small_test_split():
            lines.append(f"warning: {small}")
        if (self.windows or self.lengths).cuts_most:
            lines.append(f"warning: {length_options(self)}")
        epochs = choice.epochs if (choice := self.epoch_choice) else None
        if plateau := plateau_risk(self.train_texts, epochs):
            lines.append(f"warning: {plateau}")
        return lines


def train_examples(
    split_sizes: dict[str, int] | None, lengths: WidthChoice, windows: WindowChoice | None
) -> int | None:
    """What one epoch trains on, when the sample held the whole dataset (`split_sizes`): train texts, or their
    windows (as many per text as the sample has)."""
    texts = (split_sizes or {}).get("train")
    if texts is None or windows is None:
        return texts
    return round(texts * trained_per_text(lengths, windows))


def trained_profile(lengths: WidthChoice, windows: WindowChoice | None) -> LengthProfile:
    """The token lengths of what trains: the texts', or with long_texts: windows their windows'."""
    return lengths.profile if windows is None else windows.trained


def trained_per_text(lengths: WidthChoice, windows: WindowChoice | None) -> float:
    """Examples trained per text in the sample: 1, or with long_texts: windows its windows per text."""
    return len(trained_profile(lengths, windows).lengths) / max(1, len(lengths.profile.lengths))


def train_texts(split_sizes: dict[str, int] | None, lengths: WidthChoice, windows: WindowChoice | None) -> TrainTexts:
    """The trained texts' (or windows') median length as read and their count, as the recipe and the epochs see
    them."""
    count = train_examples(split_sizes, lengths, windows)
    return TrainTexts.of(trained_profile(lengths, windows), count, lengths.width)


def resolve_recipe(
    config: PipelineConfig, model: ModelFacts, texts: TrainTexts | None = None
) -> tuple[PipelineConfig, RecipeChoice]:
    """The config with its recipe's warm-up and clipping chosen from the model (models/training/recipe.py), and the
    whole choice, its learning rate chosen too where auto (from the model and, where the sample tells them, the train
    split's texts). The rate stays as the config gives it: under auto the Trainer chooses it the same way from its
    own train split, which it counts whole where a sample may stop short, and its log says why it chose it."""
    recipe = choose_recipe(model.folder.shape, model.folder.model_type, config.training, texts)
    chosen = {"warmup_ratio": recipe.warmup_ratio, "gradient_clip_norm": recipe.clip_norm}
    return config.model_copy(update={"training": config.training.model_copy(update=chosen)}), recipe


def with_recipe_chosen(config: PipelineConfig) -> PipelineConfig:
    """The config with its recipe's warm-up and clipping chosen from the model's config.json (no weights read):
    what a compiled spec fixes, as a local run's preflight does."""
    training = config.training
    if AUTO not in (training.warmup_ratio, training.gradient_clip_norm):
        return config
    return resolve_recipe(config, check_model(config, weights=False))[0]


def with_model_pinned(config: PipelineConfig) -> PipelineConfig:
    """A hub model's branch or tag resolved to its commit (what a compiled spec fixes, so its components read one
    model however long the schedule runs and whatever is pushed to the repo meanwhile); a commit, a folder or a
    packaged model as they are."""
    name, revision = config.model.name, config.model.revision
    if hub_model_id(name) is None or (revision and COMMIT.fullmatch(revision)):
        return config
    commit = hub_commit(name, resolve_model_dir(name, revision, weights=False))
    return config.model_copy(update={"model": config.model.model_copy(update={"revision": commit})})


def choose(found: Found) -> Choices:
    """Every `auto` chosen from what the preflight found: the width (and windows, and batch widths) from the
    sample's token lengths, the recipe from the model, the hub model pinned to the commit the preflight read."""
    config, model, data = found.config, found.model, found.data
    placed, complete = data.placed, data.complete
    names = list(config.dataset.label_names)
    training_rows = placed.rows.get("train") or [row for rows in placed.rows.values() for row in rows]
    lengths = choose_width(
        token_lengths(model.folder.directory, training_rows, model.folder.position_limit),
        config.model.max_seq_length,
        model.folder.position_limit,
    )
    # A hub model pinned to the commit read here: a push to its repo during the run cannot mix files of two commits
    model_update: dict = {"max_seq_length": lengths.width, **({"revision": model.commit} if model.commit else {})}
    windows = None
    if config.model.long_texts == "windows":
        windows = choose_windows(lengths.profile, lengths.width, config.model.window_stride, config.model.max_windows)
        model_update["max_windows"] = windows.windows.count
    trained = trained_profile(lengths, windows)
    buckets = choose_buckets(trained, lengths.width, config.training.batch_widths)
    packing = expected_packing(config, trained, lengths.width, buckets, windowed=windows is not None)
    chosen = {
        "model": config.model.model_copy(update=model_update),
        "training": config.training.model_copy(update={"batch_widths": buckets.buckets}),
    }
    split_sizes = {name: len(rows) for name, rows in placed.rows.items()} if complete else None
    texts = train_texts(split_sizes, lengths, windows)
    resolved, recipe = resolve_recipe(config.model_copy(update=chosen), model, texts)
    read = data.read
    return Choices(
        config=resolved,
        recipe=recipe,
        lengths=lengths,
        buckets=buckets,
        packing=packing,
        windows=windows,
        encoder=model.folder.shape,
        split_sizes=split_sizes,
        test_labels=({names[i]: n for i, n in placed.label_counts().get("test", {}).items()} if complete else None),
        sampled_rows=data.rows_read,
        shards=len(read.shards),
        window=read.window,
        input_fingerprint=read.input_fingerprint,
        model_commit=model.commit,
        architecture=model.architecture,
        block_dropout=model.folder.block_dropout,
    )


def expected_packing(
    config: PipelineConfig, trained: LengthProfile, width: int, buckets: BucketChoice, *, windowed: bool
) -> PackingChoice:
    """What the Trainer will decide of training.packing on this machine (it decides again where it runs: a cloud
    Trainer on a TPU does not pack); `true` where this run cannot pack is refused here, before any component."""
    return configured_packing(config.training, trained.lengths, width, buckets.padded_share, windowed=windowed)


def lengths_with_cost(chosen: Choices) -> str:
    """The length choice and what it costs: training seconds per epoch on this machine at its matmul peak."""
    text = chosen.describe_lengths()
    if chosen.encoder is None:
        return text
    from models.hardware.machine_peak import matmul_peak

    peak = matmul_peak("float32", seconds=0.5)
    examples = (chosen.split_sizes or {}).get("train")
    per = f"{examples:,} training texts" if examples else "1,000 training texts"
    scale = trained_per_text(chosen.lengths, chosen.windows)
    seconds = epoch_seconds(
        chosen.trained_lengths, round((examples or 1000) * scale), chosen.buckets.buckets, chosen.encoder, peak.gflops,
        chosen.packed_padding,
    )  # fmt: skip
    return f"{text}; training ~{seconds:,.0f} s per epoch of {per} on this machine ({peak.gflops:,.0f} GFLOP/s fp32)"


def memory_lines(chosen: Choices) -> list[str]:
    """A training step's memory at the widest batch, and a warning with the batch (or width) that fits where it
    would not fit this machine (models/encoders/step_memory.py)."""
    from models.encoders.classifier import can_recompute_blocks
    from models.encoders.step_memory import (
        FITS_SHARE,
        GIB,
        largest_fitting_batch,
        machine_memory,
        recompute_blocks_pays,
        step_memory,
        texts_of,
    )

    training = chosen.config.training
    shape, batch, width, memory = chosen.encoder, training.batch_size, chosen.lengths.width, machine_memory()
    can = can_recompute_blocks(chosen.block_dropout, training.dropout)
    recompute = recompute_blocks_pays(shape, batch, width, memory, can)
    needed = step_memory(shape, batch, width, recompute)
    recomputed = ", blocks recomputed in the backward pass (kept, they would not fit)" if recompute else ""
    lines = [f"memory: a training step of {texts_of(batch)} at width {width} holds {needed.describe()}{recomputed}"]
    if needed.total <= FITS_SHARE * memory:
        return lines
    fitting = largest_fitting_batch(shape, width, memory, recompute)
    fix = (
        f"training.batch_size {fitting} fits at this width"
        if fitting
        else f"not one text fits at width {width}: lower model.max_seq_length"
    )
    if not can and can_recompute_blocks(chosen.block_dropout, 0.0):
        fix += "; or training.dropout 0, with which the Trainer recomputes blocks in the backward pass"
    lines.append(f"warning: that is more than this machine's {memory / GIB:.0f} GiB can hold: {fix}")
    return lines


def length_options(chosen: Choices) -> str:
    """What a user whose texts are mostly longer than the width can do, said before anything trains."""
    choice = chosen.lengths
    longer = (
        f"the model holds at most {choice.width} tokens: a model with longer positions, or shorter texts"
        if choice.at_position_limit
        else "raise model.max_seq_length (or set it to auto)"
    )
    if chosen.windows is not None:
        count = chosen.windows.windows.count
        cut = f"{chosen.windows.cut_share:.0%} of the training texts are longer than {count} windows hold"
        return f"{cut} and will be cut: raise model.max_windows (each window costs a training example)"
    if chosen.config.model.long_texts == "truncate" and not chosen.config.dataset.text_pair_column:
        longer += "; or keep each text's start and end (--long-texts head_tail), or all of it in windows "
        longer += "(--long-texts windows)"
    cut = f"{choice.cut_share:.0%} of the training texts are longer than {choice.width} tokens and will be cut"
    return f"{cut}: {longer}"

"""The Trainer's input pipeline: counted splits (a corrupt file named), batches of the model's inputs, windows
of long texts as examples, batches cut to the narrowest width that holds them."""

from __future__ import annotations

import tensorflow as tf
from tfx_bsl.public import tfxio

from components.trainer.config import TrainerSettings
from models.errors import UserError
from models.names import ATTENTION_MASK, LABEL_FEATURE, MODEL_INPUT_FEATURES, WINDOW_MASK
from models.training.lengths import AUTO, LENGTH_SAMPLE, BucketChoice, LengthProfile, bucket_edges, choose_buckets
from models.training.row_packing import pack


class CorruptInputError(UserError, RuntimeError):
    """An input TFRecord file cannot be read to its end."""


def count_records(file_patterns: list[str], windows: int | None = None) -> int:
    """Counts the examples, reading every file to its end: a truncated or corrupted file is named. With `windows`
    (model.long_texts: windows), the windows that hold text: each one is a training example."""
    files = sorted(f for pattern in file_patterns for f in tf.io.gfile.glob(pattern))
    if not files:
        raise CorruptInputError(f"no input files match {file_patterns}")
    mask_spec = {WINDOW_MASK: tf.io.FixedLenFeature([windows or 1], tf.int64)}

    def examples_in(record):
        if windows is None:
            return tf.constant(1, tf.int64)
        return tf.reduce_sum(tf.io.parse_single_example(record, mask_spec)[WINDOW_MASK])

    total = 0
    for path in files:
        dataset = tf.data.TFRecordDataset(path, compression_type="GZIP")
        try:
            total += int(dataset.reduce(tf.constant(0, tf.int64), lambda count, r: count + examples_in(r)).numpy())
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
            raise CorruptInputError(
                f"{path} is truncated or corrupted ({error.message.splitlines()[0]}); it was not skipped. "
                "Re-run the component that wrote it (e.g. with --no-cache)."
            ) from error
    return total


def written_model_inputs(tf_transform_output) -> tuple[str, ...]:
    """The model inputs Transform wrote (token_type_ids only where the tokenizer takes them): the model reads what
    the transform graph computes, in training and in serving, so the two cannot disagree."""
    written = tf_transform_output.transformed_feature_spec()
    return tuple(name for name in MODEL_INPUT_FEATURES if name in written)


def without_autotuning(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """The dataset with tf.data's autotuning thread switched off (AUTOTUNE then means the core count).

    That thread sleeps up to ~10 s between rounds and an iterator's destructor waits for it
    (RootDataset::Iterator::~Iterator), so `fit` and each validation returned up to 10 s after their last
    step. The input pipeline has nothing to tune here: a step is hundreds of ms of model work.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def make_dataset(fn_args, files, tf_transform_output, batch_size, model_inputs, *, training, seed, static_shapes=True):
    """Batches of (model inputs, label); with static_shapes (XLA / TPU) a last partial batch is dropped."""
    options = tfxio.TensorFlowDatasetOptions(
        batch_size=batch_size,
        label_key=LABEL_FEATURE,
        drop_final_batch=static_shapes,
        shuffle=training,
        shuffle_seed=seed,
        num_epochs=None if training else 1,
    )
    dataset = fn_args.data_accessor.tf_dataset_factory(files, options, tf_transform_output.transformed_metadata.schema)
    return without_autotuning(dataset.map(lambda features, label: ({k: features[k] for k in model_inputs}, label)))


def sharded_by_batch(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Under several workers, each takes its piece of every global batch (Keras splits the batch, TF's DATA
    auto-sharding hands out the pieces), so the workers step through the batches one machine would: the global
    batch, the batch widths and the schedule stay one machine's. Each worker still reads every record (FILE
    sharding would need as many files as workers and give each its own buckets): parsing a record is cheap
    beside a step of the encoder."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def bucket_by_length(
    dataset: tf.data.Dataset,
    batch_size: int,
    widths: tuple[int, ...],
    max_seq_length: int,
    *,
    keep_partial_batches: bool = False,
):
    """Groups examples of similar token length and cuts each batch to the smallest width that holds it.

    Padding is masked, so results are unchanged; short reviews stop paying for max_seq_length. Each width
    is one static shape, so XLA / TPU compile once per width. A finite dataset (validation) keeps each
    bucket's last partial batch with keep_partial_batches; without it, they are dropped (static shapes).
    """
    edges = bucket_edges(max_seq_length, widths)
    widths = edges[:-1]
    if not widths:
        return dataset
    all_widths = tf.constant(edges, tf.int32)

    def length(features, label):
        return tf.reduce_sum(tf.cast(features[ATTENTION_MASK], tf.int32))

    def trim(features, label):
        longest = tf.reduce_max(tf.reduce_sum(tf.cast(features[ATTENTION_MASK], tf.int32), axis=1))
        width = tf.gather(all_widths, tf.searchsorted(all_widths, [longest], side="left")[0])
        return {k: v[:, :width] for k, v in features.items()}, label

    return (
        dataset.unbatch()
        .bucket_by_sequence_length(
            length,
            bucket_boundaries=[w + 1 for w in widths],
            bucket_batch_sizes=[batch_size] * (len(widths) + 1),
            drop_remainder=not keep_partial_batches,
            no_padding=True,
        )
        .map(trim, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


def validation_data(eval_batches, batch_size, widths, max_seq_length, *, static_shapes: bool):
    """Validation batches. With static_shapes (TPU): full batches at max_seq_length, as make_dataset gives them.
    Otherwise every example once, length-bucketed as training is: on the default split validation sees all
    1,275 examples (full batches only: 1,248) in 7.6 s instead of 8.7 s at width 64."""
    if static_shapes:
        return eval_batches
    return bucket_by_length(eval_batches, batch_size, widths, max_seq_length, keep_partial_batches=True)


def window_count(settings: TrainerSettings) -> int | None:
    windows = settings.model.windows
    return None if windows is None else windows[1]


def window_examples(
    dataset: tf.data.Dataset, count: int, width: int, batch_size: int, *, shuffle_seed: int | None, static_shapes: bool
):
    """Batches of texts split into `count` windows each (model.long_texts: windows) -> batches of the windows that
    hold text, each an example with its text's label. Training shuffles them (shuffle_seed), so a batch mixes
    windows of many texts rather than the neighbours of one; static_shapes keeps full batches only."""

    def split(features, label):
        keep = tf.reshape(features[WINDOW_MASK], [-1]) > 0
        windows = {
            name: tf.boolean_mask(tf.reshape(value, [-1, width]), keep)
            for name, value in features.items()
            if name != WINDOW_MASK
        }
        return windows, tf.boolean_mask(tf.repeat(label, count, axis=0), keep)

    windows = dataset.map(split).unbatch()
    if shuffle_seed is not None:
        windows = windows.shuffle(8 * batch_size, seed=shuffle_seed)
    return windows.batch(batch_size, drop_remainder=static_shapes)


def split_batches(
    fn_args, files, tf_transform_output, settings: TrainerSettings, global_batch: int, model_inputs, *, training: bool,
    static_shapes: bool,
) -> tf.data.Dataset:  # fmt: skip
    """Batches of one split's examples as the model takes them: texts, or under model.long_texts: windows their
    windows (a training split's shuffled by training.seed)."""
    windows, seed = window_count(settings), settings.training.seed
    inputs = [*model_inputs, *([WINDOW_MASK] if windows else [])]
    dataset = make_dataset(
        fn_args, files, tf_transform_output, global_batch, inputs, training=training, seed=seed,
        static_shapes=static_shapes,
    )  # fmt: skip
    if windows is None:
        return dataset
    return window_examples(
        dataset, windows, settings.model.max_seq_length, global_batch, shuffle_seed=seed if training else None,
        static_shapes=static_shapes,
    )  # fmt: skip


def train_lengths(train_batches: tf.data.Dataset) -> LengthProfile:
    """The token lengths of the first LENGTH_SAMPLE train examples: what `auto` batch widths and packing are
    chosen from in the Trainer (a compiled spec; a local run's preflight chose the widths from its own sample)."""
    counts = train_batches.map(lambda features, label: tf.reduce_sum(features[ATTENTION_MASK], axis=1))
    return LengthProfile.of(list(counts.unbatch().take(LENGTH_SAMPLE).as_numpy_iterator()))


def chosen_batch_widths(requested, width: int, profile: LengthProfile) -> BucketChoice:
    """The config's bucket widths, or for `auto` those chosen from `profile` by the preflight's own rule."""
    choice = choose_buckets(profile, width, requested)
    if requested == AUTO:
        print(f"[Trainer] {choice.describe()}; from {len(profile.lengths):,} train examples", flush=True)
    return choice


def packed_batches(dataset: tf.data.Dataset, width: int) -> tf.data.Dataset:
    """Each batch's texts packed into rows of `width` (models/training/packing.py)."""
    return dataset.map(lambda features, label: pack(features, label, width)).prefetch(tf.data.AUTOTUNE)

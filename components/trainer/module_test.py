"""Length bucketing keeps every example and label, only cutting padding; the record reads the history by epoch."""

import numpy as np
import pytest
import tensorflow as tf

from components.trainer.data import bucket_by_length


def test_batches_are_cut_to_the_smallest_width_that_holds_them():
    lengths = [5, 30, 40, 12, 64, 8, 33, 20] * 8
    mask = np.array([[1] * n + [0] * (64 - n) for n in lengths], np.int64)
    ids = mask * (np.arange(64) + 1)
    labels = np.arange(len(lengths), dtype=np.int64)
    batched = tf.data.Dataset.from_tensor_slices(({"input_ids": ids, "attention_mask": mask}, labels)).batch(8)
    seen = {}
    for features, label in bucket_by_length(batched, 4, (32,), 64):
        width = features["input_ids"].shape[1]
        longest = int(features["attention_mask"].numpy().sum(axis=1).max())
        assert width == (32 if longest <= 32 else 64)
        for row, lab in zip(features["input_ids"].numpy(), label.numpy(), strict=True):
            seen[int(lab)] = row
    assert sorted(seen) == list(range(len(lengths)))  # nothing lost (64 examples, batches of 4)
    for lab, row in seen.items():
        assert int((row > 0).sum()) == lengths[lab]


def test_no_buckets_leaves_the_dataset_alone():
    dataset = tf.data.Dataset.range(3)
    assert bucket_by_length(dataset, 4, (), 64) is dataset


def _transformed_examples(tmp_path, lengths, width=64):
    """A gzip TFRecord of transformed examples (one per token length, `width` wide) and the fn_args / transform
    output run_fn reads it with, through TFX's own dataset factory."""
    from types import SimpleNamespace

    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.components.trainer.fn_args_utils import DataAccessor
    from tfx.components.util import tfxio_utils
    from tfx.types import standard_artifacts

    from models.names import ATTENTION_MASK, INPUT_IDS, LABEL_FEATURE

    with tf.io.TFRecordWriter(str(tmp_path / "data.gz"), options="GZIP") as writer:
        for n in lengths:
            mask = [1] * n + [0] * (width - n)
            ints = {INPUT_IDS: mask, ATTENTION_MASK: mask, LABEL_FEATURE: [n % 2]}
            features = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=v)) for k, v in ints.items()}
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    schema = schema_pb2.Schema()
    for name, size in ((INPUT_IDS, width), (ATTENTION_MASK, width), (LABEL_FEATURE, 1)):
        feature = schema.feature.add(name=name, type=schema_pb2.INT)
        feature.shape.dim.add(size=size)
        feature.presence.min_fraction = 1.0
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path)
    factory = tfxio_utils.get_tf_dataset_factory_from_artifact([examples], [])
    files = [str(tmp_path / "data.gz")]
    fn_args = SimpleNamespace(data_accessor=DataAccessor(factory, None, None), train_files=files, eval_files=files)
    spec = {name: tf.io.FixedLenFeature([width], tf.int64) for name in (INPUT_IDS, ATTENTION_MASK)}
    transform_output = SimpleNamespace(
        transformed_metadata=SimpleNamespace(schema=schema), transformed_feature_spec=lambda: spec
    )
    return fn_args, transform_output, files, [INPUT_IDS, ATTENTION_MASK]


def test_the_trainers_datasets_run_without_the_autotuning_thread(tmp_path):
    """tf.data's autotuning thread made each fit and validation end up to 10 s after its last step (an
    iterator's destructor waits out the thread's sleep); run_fn's datasets, read through TFX's own dataset
    factory as the Trainer reads them, and their length-bucketed form must not start it."""
    from components.trainer.data import make_dataset
    from models.names import ATTENTION_MASK, INPUT_IDS

    fn_args, transform_output, files, inputs = _transformed_examples(tmp_path, (3, 40, 7, 20))
    for training in (True, False):
        dataset = make_dataset(fn_args, files, transform_output, 2, inputs, training=training, seed=0)
        assert dataset.options().autotune.enabled is False
        batches = bucket_by_length(dataset, 2, (32,), 64) if training else dataset
        assert batches.options().autotune.enabled is False
        features, _ = next(iter(batches))
        assert sorted(features) == [ATTENTION_MASK, INPUT_IDS]


def test_the_trainers_optimizer_updates_embeddings_densely_and_as_the_sparse_path_does():
    """dense_gradients only changes how the word-embedding table is updated, not the update."""
    import tf_keras

    from components.trainer.module import compile_for_training, dense_gradients
    from models.encoders import classifier
    from models.training.config import TrainingConfig
    from tests.tiny_model import tiny_bert_config

    slices = tf.IndexedSlices(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([2, 2]), tf.constant([3, 2]))
    dense_tensor = tf.ones([2])
    (summed, _), (untouched, _) = dense_gradients([(slices, "table"), (dense_tensor, "bias")])
    assert isinstance(summed, tf.Tensor) and summed.numpy().tolist() == [[0, 0], [0, 0], [4, 6]]
    assert untouched is dense_tensor

    ids = np.array([[101, 2204, 3185, 102], [101, 6659, 102, 0]], np.int64)
    batch = ({"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64)}, np.array([1, 0]))
    tables = []
    for transformers in ([dense_gradients], []):
        tf_keras.utils.set_random_seed(0)
        config = tiny_bert_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        model = classifier.build(config, ["neg", "pos"])
        table = model.get_input_embeddings().weights[0]
        initial = table.numpy()
        compile_for_training(model, TrainingConfig(warmup_ratio=0.0), total_steps=10)
        assert model.optimizer.gradient_transformers == [dense_gradients]
        model.optimizer.gradient_transformers = transformers
        for _ in range(3):
            model.train_on_batch(*batch)
        tables.append(model.get_input_embeddings().weights[0].numpy())
    assert not np.allclose(tables[0][2204], initial[2204])  # the rows the batch used were trained
    # the same batch shapes on both sides: only the gradient's aggregation differs, a few ulps on any CPU
    np.testing.assert_allclose(tables[0], tables[1], rtol=1e-5, atol=1e-7)


def test_validation_sees_every_example_once_cut_to_its_bucket_and_full_static_batches_on_a_tpu(tmp_path):
    from components.trainer.data import make_dataset, validation_data
    from models.names import ATTENTION_MASK, INPUT_IDS

    lengths = (3, 40, 7, 20, 64, 12, 33)
    fn_args, transform_output, files, inputs = _transformed_examples(tmp_path, lengths)

    def batches(static_shapes):
        dataset = make_dataset(
            fn_args, files, transform_output, 2, inputs, training=False, seed=0, static_shapes=static_shapes
        )
        return list(validation_data(dataset, 2, (16, 32), 64, static_shapes=static_shapes))

    seen = []
    for features, _ in batches(static_shapes=False):
        counts = features[ATTENTION_MASK].numpy().sum(axis=1)
        assert features[INPUT_IDS].shape[1] == min(w for w in (16, 32, 64) if w >= counts.max())
        seen += counts.tolist()
    assert sorted(seen) == sorted(lengths)  # every example once, partial batches included
    assert [f[INPUT_IDS].shape for f, _ in batches(static_shapes=True)] == [(2, 64)] * 3  # 7 // 2, one shape


def test_a_compiled_specs_auto_buckets_are_chosen_by_the_trainer_from_its_train_split(tmp_path, capsys):
    """A local run's preflight resolves `auto`; a compiled spec's Trainer measures its train split (read
    through TFX's dataset factory) by the same rule, and the config's widths still win."""
    from components.trainer.data import chosen_batch_widths, make_dataset, train_lengths

    lengths = (12, 13, 14, 28, 29, 30, 44, 45, 60) * 4
    fn_args, transform_output, files, inputs = _transformed_examples(tmp_path, lengths)
    dataset = make_dataset(fn_args, files, transform_output, 4, inputs, training=False, seed=0, static_shapes=False)
    profile = train_lengths(dataset)
    assert sorted(profile.lengths) == sorted(lengths)
    assert chosen_batch_widths("auto", 64, profile).buckets == (16, 32, 48)
    assert f"from {len(lengths)} train examples" in capsys.readouterr().out
    assert chosen_batch_widths((32,), 64, profile).buckets == (32,)


@pytest.mark.parametrize(("median", "rate", "epochs"), [(300, 3e-5, 10), (30, 1e-4, 9)])
def test_a_compiled_specs_trainer_chooses_the_rate_and_epochs_from_its_train_splits_lengths_and_size(
    tmp_path, median, rate, epochs
):
    """A compiled spec leaves the learning rate and the epochs to auto: the Trainer measures its train split (read
    through TFX's dataset factory) and gives long texts and few examples the plateau's 3e-5 and 10 epochs, as a
    local run's preflight does from its sample; short texts keep the model's rate and auto's epochs."""
    from components.trainer.config import TrainerSettings
    from components.trainer.module import compile_for_training
    from components.trainer.plan import plan_training, training_placement
    from models.encoders.from_folder import build_classifier
    from models.training.config import ModelConfig, TrainingConfig
    from tests.tiny_model import write_tiny_bert

    model_dir = write_tiny_bert(tmp_path / "bert-512", max_position_embeddings=512)
    lengths = [median - 5 + i % 11 for i in range(1_200)]  # 10,000 / 1,200: 9 passes where texts are short
    fn_args, transform_output, _, _ = _transformed_examples(tmp_path, lengths, width=320)
    training = TrainingConfig(epochs="auto", learning_rate="auto", batch_size=32)
    settings = TrainerSettings(
        model=ModelConfig(name=str(model_dir), max_seq_length=320), training=training, label_names=("a", "b")
    )
    plan = plan_training(fn_args, settings, training_placement(training), transform_output)
    assert plan.train_texts.median_tokens == median and plan.epochs.epochs == epochs
    assert plan.epochs.reason.startswith("auto: long texts (median 300 tokens)") == (median == 300)
    model, _ = build_classifier(plan.folder, ["a", "b"])
    recipe = compile_for_training(model, training, plan.total_steps, texts=plan.train_texts)
    assert recipe.learning_rate == rate and model.optimizer.learning_rate.peak == rate  # what the steps are taken at


@pytest.mark.parametrize("multi_label", [False, True])
def test_texts_in_windows_become_one_example_per_window_that_holds_text_with_the_texts_label(multi_label):
    """model.long_texts: windows. Three texts of two windows of width 4 each; the second's second window is a
    padding window (mask 0) and is dropped; every other window keeps its text's label (an id, or a 0/1 vector)."""
    from components.trainer.data import window_examples

    ids = np.array([[1, 1, 0, 0, 2, 2, 0, 0], [3, 0, 0, 0, 0, 0, 0, 0], [4, 4, 4, 0, 5, 5, 0, 0]], np.int64)
    mask = np.array([[1, 1], [1, 0], [1, 1]], np.int64)
    labels = np.array([[1, 0], [0, 1], [1, 1]], np.int64) if multi_label else np.array([0, 1, 2], np.int64)
    texts = tf.data.Dataset.from_tensor_slices(({"input_ids": ids, "window_mask": mask}, labels)).batch(2)
    (batch,) = list(window_examples(texts, 2, 4, 5, shuffle_seed=None, static_shapes=False))  # across texts
    features, got = batch
    assert features["input_ids"].numpy()[:, 0].tolist() == [1, 2, 3, 4, 5] and features["input_ids"].shape[1] == 4
    assert got.numpy().tolist() == [labels[i].tolist() for i in (0, 0, 1, 2, 2)]
    shuffled = list(window_examples(texts, 2, 4, 2, shuffle_seed=0, static_shapes=True))
    assert [f["input_ids"].shape for f, _ in shuffled] == [(2, 4), (2, 4)]  # full batches only: static shapes


def test_fp16_scales_the_loss_and_many_steps_run_per_execution_on_any_device():
    """What a T4 or V100 (fp16) and a TPU (32 steps per execution) get, built on this CPU: the real Trainer
    compile under Keras' mixed_float16 policy wraps AdamW in dynamic loss scaling, and a fit of 8 steps at 4 per
    execution runs every step and calls back once per execution."""
    import tf_keras

    from components.trainer.module import compile_for_training
    from models.encoders import classifier
    from models.hardware.distribution import KERAS_POLICY
    from models.training.config import TrainingConfig
    from tests.tiny_model import tiny_bert_config

    ids = np.tile(np.array([[101, 2204, 3185, 102]], np.int64), (16, 1))
    data = tf.data.Dataset.from_tensor_slices(({"input_ids": ids, "attention_mask": ids > 0}, np.arange(16) % 2))
    tf_keras.mixed_precision.set_global_policy(KERAS_POLICY["fp16"])
    try:
        tf_keras.utils.set_random_seed(0)
        model = classifier.build(tiny_bert_config(), ["neg", "pos"])
        compile_for_training(model, TrainingConfig(), total_steps=8, steps_per_execution=4)
        assert isinstance(model.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
        assert model.encoder.compute_dtype == "float16"
        batch_ends = []
        callback = tf_keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: batch_ends.append(batch))
        history = model.fit(data.batch(2).repeat(), steps_per_epoch=8, epochs=1, callbacks=[callback], verbose=0)
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    assert np.isfinite(history.history["loss"][0]) and int(model.optimizer.iterations.numpy()) == 8
    assert batch_ends == [3, 7]  # one callback per execution of 4 steps


def test_frozen_embeddings_leave_training_and_stay_as_pretrained_while_the_encoder_learns(tiny_bert_dir):

    from components.trainer.module import compile_for_training
    from models.encoders.from_folder import (
        WeightsError,
        build_classifier,
        freeze_input_embeddings,
        read_model_folder,
        weights_only_copy,
    )
    from models.serving.signatures import model_logits
    from models.training.config import TrainingConfig

    files = read_model_folder(tiny_bert_dir)
    trained, _ = build_classifier(files, ["a", "b"])
    frozen, _ = build_classifier(files, ["a", "b"], freeze_embeddings=True)
    embeddings = frozen.get_input_embeddings().weights
    assert {w.name.split("/")[-2] for w in embeddings} >= {"word_embeddings", "position_embeddings", "LayerNorm"}
    frozen_names = {w.name for w in embeddings}

    def names(variables):  # without the model's own name, which Keras numbers per instance
        return {v.name.split("/", 1)[1] for v in variables}

    assert names(trained.trainable_variables) - names(frozen.trainable_variables) == names(embeddings)
    assert len(frozen.trainable_variables) == len(trained.trainable_variables) - len(embeddings) > 0

    before = {w.name: w.numpy() for w in frozen.weights}
    compile_for_training(frozen, TrainingConfig(learning_rate=0.01, warmup_ratio=0.0), total_steps=10)
    ids = tf.constant([[101, 2204, 3185, 102], [101, 6659, 102, 0]])
    inputs = {"input_ids": ids, "attention_mask": tf.cast(ids > 0, tf.int32)}
    frozen.fit(tf.data.Dataset.from_tensors((inputs, tf.constant([0, 1]))).repeat(2), epochs=1, verbose=0)
    changed = {w.name for w in frozen.weights if not np.array_equal(w.numpy(), before[w.name])}
    assert changed and not changed & frozen_names  # the encoder and head learned; the embeddings did not move
    copy = weights_only_copy(frozen)  # what the Trainer exports: the same weights, each in its place
    np.testing.assert_array_equal(model_logits(copy, inputs), model_logits(frozen, inputs))
    with pytest.raises(WeightsError, match="no trainable input embeddings"):
        freeze_input_embeddings(frozen)  # already frozen


def test_the_more_accurate_epoch_is_looked_for_only_where_val_loss_chose_the_export():
    """Watching val_accuracy exports its best epoch already; watching val_loss, Keras' history (0-based epochs, as a
    resumed run's holds only those it ran) is read by epoch."""
    from types import SimpleNamespace

    from components.trainer.module import more_accurate_than_exported

    history = SimpleNamespace(
        epoch=[2, 3, 4], history={"val_accuracy": [0.60, 0.80, 0.70], "val_loss": [0.60, 0.65, 0.70]}
    )
    named = more_accurate_than_exported(history, "val_loss", 2, 300)
    assert named.startswith("val_accuracy was best at epoch 4 (0.800 against the exported epoch 3's 0.600")
    assert "its val_loss was higher (0.6500 against 0.6000)" in named
    assert more_accurate_than_exported(history, "val_accuracy", 2, 300) == ""
    assert more_accurate_than_exported(history, "", 2, 300) == ""  # early stopping off: the last epoch exported


@pytest.mark.parametrize("multi_label", [False, True])
def test_label_smoothing_softens_the_targets_as_transformers_and_keras_do_and_trains_through_compile(multi_label):
    """training.label_smoothing 0.1. Single label: (1 - 0.1) x the label's cross-entropy + 0.1 x the mean over the
    labels of theirs (transformers' LabelSmoother). Multi-label: each 0/1 target pulled toward 0.5 (Keras'
    BinaryCrossentropy). The Trainer's compile trains with that loss, and 0 keeps the plain one."""
    import tf_keras

    from components.trainer.module import compile_for_training, loss_and_metrics
    from models.encoders import classifier
    from models.training.config import TrainingConfig
    from tests.tiny_model import tiny_bert_config

    logits = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0]], np.float32)
    labels = np.array([[1, 0, 1], [0, 0, 1]], np.float32) if multi_label else np.array([0, 1], np.int64)
    loss, _ = loss_and_metrics(multi_label, label_smoothing=0.1)
    plain, _ = loss_and_metrics(multi_label)
    got, unsmoothed = tf.reduce_mean(loss(labels, logits)).numpy(), tf.reduce_mean(plain(labels, logits)).numpy()
    if multi_label:
        keras = tf_keras.losses.BinaryCrossentropy(from_logits=True, label_smoothing=0.1)
        assert got == pytest.approx(keras(labels, logits).numpy(), rel=1e-5)
    else:
        log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        nll, uniform = -log_p[[0, 1], labels], -log_p.mean(axis=1)
        assert got == pytest.approx((0.9 * nll + 0.1 * uniform).mean(), rel=1e-5)
        assert unsmoothed == pytest.approx(nll.mean(), rel=1e-5)
    assert abs(got - unsmoothed) > 0.01

    ids = np.tile(np.array([[101, 2204, 3185, 102]], np.int64), (4, 1))
    targets = np.array([[1, 0, 1]] * 4) if multi_label else np.arange(4) % 3
    data = tf.data.Dataset.from_tensor_slices(({"input_ids": ids, "attention_mask": ids > 0}, targets)).batch(4)
    tf_keras.utils.set_random_seed(0)
    model = classifier.build(tiny_bert_config(), ["a", "b", "c"], multi_label=multi_label)
    compile_for_training(model, TrainingConfig(label_smoothing=0.1), total_steps=1, multi_label=multi_label)
    model.fit(data, epochs=1, verbose=0)  # builds the compiled loss, as training does
    assert model.compiled_loss(tf.constant(labels), tf.constant(logits)).numpy() == pytest.approx(got, rel=1e-5)

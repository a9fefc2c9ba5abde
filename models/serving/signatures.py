"""The exported model's serving signatures; this module owns every one of them.

- `serving_default`: raw texts [N] (and `text_pair` [N] for sentence-pair models) -> probabilities [N, K],
  label_id, label, confidence (people, REST). Multi-label models: probabilities [N, K] (a sigmoid per label),
  labels [N, K] (the labels at or over their decision threshold, in label order, then "" to fill the row) and
  label_count [N].
- `serving_tf_example`: serialized tf.Examples -> the same (TF Serving's classify/predict with examples).
- `serving_evaluator`: tf.Examples -> `positive_score` (binary) or `probabilities` (multiclass), for TFMA.
- `transform_features`: tf.Examples -> the Transform outputs TFMA slices on (length bucket, truncation) and the
  unknown-token count `hftfx monitor` compares served texts by.
- `representation`: raw texts (and pairs) -> the encoder's mean hidden state per text [N, hidden], the model's own
  view of a text that `hftfx monitor` tells served texts from training texts by.
Models trained on windows of long texts (model.long_texts: windows) answer every signature per text: the Transform
splits each into windows, the model reads those that hold text, and a text's answer is their mean probability.
The Transform graph and its vocab asset travel inside; loading needs `import tensorflow_text`.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf
import tensorflow_text  # noqa: F401  (TF.Text ops of the transform graph)
import tensorflow_transform as tft

from models.names import (
    ATTENTION_MASK,
    EXAMPLES_INPUT,
    POSITIVE_SCORE,
    PROBABILITIES,
    REPRESENTATION,
    SERVING_DEFAULT,
    SERVING_EVALUATOR,
    SERVING_TF_EXAMPLE,
    SLICE_FEATURES,
    TEXT_FEATURE,
    TEXT_PAIR_FEATURE,
    TRANSFORM_FEATURES,
    UNKNOWN_TOKENS,
    WINDOW_MASK,
)

TEXT_INPUT, TEXT_PAIR_INPUT = TEXT_FEATURE, TEXT_PAIR_FEATURE  # serving_default's inputs are the raw features
# Examples per model call when a request is run shortest first: big enough to keep the matmuls efficient,
# small enough that a chunk of sorted lengths carries little padding.
INFERENCE_CHUNK = 32


def model_logits(model, inputs: dict[str, tf.Tensor]) -> tf.Tensor:
    """The classifier's logits [N, labels] in float32 (models/encoders/classifier.py)."""
    return model(inputs, training=False)


def logits_by_length(
    call_model, inputs: dict[str, tf.Tensor], attention_mask: tf.Tensor, num_labels: int, chunk: int = INFERENCE_CHUNK
) -> tf.Tensor:
    """The model's logits [N, K] for a request, computed shortest texts first, `chunk` examples per call,
    each call only as wide as its longest text; rows come back in the request's order.

    Padding is masked, so the result is the model's on the full width; only the work shrinks. A large
    batch (TFMA's, a bulk request) of mostly short reviews otherwise runs every row at its longest one's
    width: on the default test split that is more than half of the Evaluator's model FLOPs.
    """
    lengths = tf.reduce_sum(tf.cast(attention_mask, tf.int32), axis=1)
    order = tf.argsort(lengths, stable=True)
    chunks = (tf.size(order) + chunk - 1) // chunk
    parts = tf.TensorArray(tf.float32, size=chunks, element_shape=tf.TensorShape([None, num_labels]), infer_shape=False)

    def run_chunk(i, parts):
        rows = order[i * chunk : (i + 1) * chunk]
        width = tf.maximum(tf.reduce_max(tf.gather(lengths, rows)), 1)
        part = {name: tf.gather(value, rows)[:, :width] for name, value in inputs.items()}
        return i + 1, parts.write(i, tf.cast(call_model(part), tf.float32))

    _, parts = tf.while_loop(lambda i, _: i < chunks, run_chunk, (tf.constant(0), parts))
    return tf.gather(parts.concat(), tf.math.invert_permutation(order))


class ServingModule(tf.Module):
    """Transform layer + fine-tuned classifier, with the label names, as one SavedModel."""

    def __init__(
        self,
        model,
        tf_transform_output: tft.TFTransformOutput,
        label_names: Sequence[str],
        model_input_names: Sequence[str],
        text_features: Sequence[str],
        decision_thresholds: Sequence[float] | None = None,
        windows: int | None = None,
    ):
        """`windows`: each text arrives from the Transform as that many windows side by side (model.long_texts:
        windows); the answer for a text is then the mean of its windows' probabilities."""
        super().__init__()
        self._windows = windows
        self.model = model
        self.tft_layer = tf_transform_output.transform_features_layer()
        self.label_names = tf.constant(list(label_names))
        self._model_input_names = tuple(model_input_names)
        self.text_inputs = tuple(text_features)  # (text,) or (text, text_pair)
        raw_spec = tf_transform_output.raw_feature_spec()
        # Requests carry the texts alone: the label and the evaluation slice columns are never asked of a client (the
        # Transform graph is pruned to what the texts compute; TFMA reads the slice columns from the examples).
        self._example_spec = {name: raw_spec[name] for name in self.text_inputs}
        # Multi-label models answer every label whose probability reaches its threshold (None: one label per row).
        self.decision_thresholds = None if decision_thresholds is None else tf.constant(list(decision_thresholds))
        self._binary = len(label_names) == 2 and decision_thresholds is None
        # The three classifying signatures share one traced function from raw features on: the model and the
        # Transform graph are traced and stored once instead of three times (smaller, faster to save and load).
        raw_specs = {
            name: tf.TensorSpec([None, *spec.shape], spec.dtype, name=name) for name, spec in self._example_spec.items()
        }
        self._classify = tf.function(self._classify_raw, input_signature=[raw_specs])
        self._represent = tf.function(self._represent_raw, input_signature=[raw_specs])
        text_spec = tf.TensorSpec([None], tf.string, name=TEXT_INPUT)
        if TEXT_PAIR_INPUT in self.text_inputs:
            specs = [text_spec, tf.TensorSpec([None], tf.string, name=TEXT_PAIR_INPUT)]
            self.serve_text = tf.function(self._serve_pair, input_signature=specs)
            self.represent_text = tf.function(self._represent_pair, input_signature=specs)
        else:
            self.serve_text = tf.function(self._serve_text, input_signature=[text_spec])
            self.represent_text = tf.function(self._represent_text, input_signature=[text_spec])

    def _model_inputs(self, raw_features: dict[str, tf.Tensor]):
        """(the model's inputs, one row a text or a row a window that holds text; for windows, each row's text index
        and the text count, else None)."""
        transformed = self.tft_layer(raw_features)
        inputs = {name: transformed[name] for name in self._model_input_names}
        if not self._windows:
            return inputs, None
        inputs, text_of_window = self._windows_holding_text(inputs, transformed[WINDOW_MASK])
        return inputs, (text_of_window, tf.shape(transformed[WINDOW_MASK])[0])

    @staticmethod
    def _per_text(values: tf.Tensor, windows) -> tf.Tensor:
        """Rows of windows -> a row a text, their mean (`windows` from _model_inputs; None: rows are texts)."""
        return values if windows is None else tf.math.unsorted_segment_mean(values, *windows)

    def _classify_raw(self, raw_features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        inputs, windows = self._model_inputs(raw_features)
        logits = logits_by_length(
            lambda inputs: model_logits(self.model, inputs),
            inputs,
            inputs[ATTENTION_MASK],
            num_labels=int(self.label_names.shape[0]),
        )
        multi_label = self.decision_thresholds is not None
        probabilities = tf.sigmoid(logits) if multi_label else tf.nn.softmax(logits, axis=-1)
        # Windows: the mean of their probabilities, still a probability (calibration reads the same), and one
        # confident window moves a text's answer by its share, not to certainty as a mean of logits can.
        probabilities = self._per_text(probabilities, windows)
        if multi_label:
            return self._labels_over_thresholds(probabilities)
        label_id = tf.argmax(probabilities, axis=-1)
        return {
            PROBABILITIES: probabilities,
            "label_id": label_id,
            "label": tf.gather(self.label_names, label_id),
            "confidence": tf.reduce_max(probabilities, axis=-1),
        }

    def _represent_raw(self, raw_features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        inputs, windows = self._model_inputs(raw_features)
        pooled = logits_by_length(
            self.model.pooled, inputs, inputs[ATTENTION_MASK], num_labels=self.model.encoder_shape().hidden
        )
        return {REPRESENTATION: self._per_text(pooled, windows)}  # a text's representation: its windows' mean

    def _windows_holding_text(self, inputs: dict[str, tf.Tensor], window_mask: tf.Tensor):
        """[N, windows x width] inputs -> [W, width] for the W windows that hold text, and each one's text index."""
        keep = tf.reshape(window_mask, [-1]) > 0
        windows = {
            name: tf.boolean_mask(tf.reshape(value, [-1, value.shape[1] // self._windows]), keep)
            for name, value in inputs.items()
        }
        text_index = tf.repeat(tf.range(tf.shape(window_mask)[0]), self._windows)
        return windows, tf.boolean_mask(text_index, keep)

    def _labels_over_thresholds(self, probabilities: tf.Tensor) -> dict[str, tf.Tensor]:
        """Multi-label answers: each row's labels at or over their threshold, first and in label order."""
        chosen = probabilities >= self.decision_thresholds
        order = tf.argsort(tf.cast(chosen, tf.int32), axis=-1, direction="DESCENDING", stable=True)
        names = tf.where(tf.gather(chosen, order, batch_dims=1), tf.gather(self.label_names, order), "")
        return {
            PROBABILITIES: probabilities,
            "labels": names,
            "label_count": tf.reduce_sum(tf.cast(chosen, tf.int64), axis=-1),
        }

    def _parse(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        return tf.io.parse_example(examples, self._example_spec)

    def _as_features(self, **texts) -> dict[str, tf.Tensor]:
        # Shaped like the parsed features: the schema gives each raw text a fixed shape of [1].
        return {name: tf.reshape(value, [-1, *self._example_spec[name].shape]) for name, value in texts.items()}

    def _serve_text(self, text):
        return self._classify(self._as_features(**{TEXT_INPUT: text}))

    def _serve_pair(self, text, text_pair):
        return self._classify(self._as_features(**{TEXT_INPUT: text, TEXT_PAIR_INPUT: text_pair}))

    def _represent_text(self, text):
        return self._represent(self._as_features(**{TEXT_INPUT: text}))

    def _represent_pair(self, text, text_pair):
        return self._represent(self._as_features(**{TEXT_INPUT: text, TEXT_PAIR_INPUT: text_pair}))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)])
    def serve_tf_example(self, examples):
        return self._classify(self._parse(examples))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)])
    def serve_evaluator(self, examples):
        probabilities = self._classify(self._parse(examples))[PROBABILITIES]
        if self._binary:
            return {POSITIVE_SCORE: probabilities[:, 1]}
        return {PROBABILITIES: probabilities}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)])
    def transform_features(self, examples):
        transformed = self.tft_layer(self._parse(examples))
        return {name: transformed[name] for name in (*SLICE_FEATURES, UNKNOWN_TOKENS) if name in transformed}

    def signatures(self) -> dict:
        return {
            SERVING_DEFAULT: self.serve_text.get_concrete_function(),
            SERVING_TF_EXAMPLE: self.serve_tf_example.get_concrete_function(),
            SERVING_EVALUATOR: self.serve_evaluator.get_concrete_function(),
            TRANSFORM_FEATURES: self.transform_features.get_concrete_function(),
            REPRESENTATION: self.represent_text.get_concrete_function(),
        }


def export(module: ServingModule, export_dir: str) -> None:
    """Saves the signatures and the weights, without Keras' per-layer call traces: those serve only reloading
    the model as Keras, which nothing does, and cost MiniLM-L6's export 6 s (13.9 s -> 8.1 s) and every load
    1.4 s (3.0 s -> 1.6 s; TFMA, TF Serving). Keras' own `save_traces=False` switch; it has no public form for
    a Keras model inside a tf.Module."""
    from tf_keras.src.saving.legacy.saved_model.utils import keras_option_scope

    with keras_option_scope(save_traces=False, in_tf_saved_model_scope=False):
        tf.saved_model.save(module, export_dir, signatures=module.signatures())

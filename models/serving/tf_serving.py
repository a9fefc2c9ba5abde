"""The exported model as TF Serving sees it: REST payloads, warm-up requests, and the ops it must provide.

TF Serving loads the SavedModel, registers its built-in ops (TensorFlow core plus the tensorflow_text ops
its official builds link), replays `assets.extra/tf_serving_warmup_requests`, then answers REST calls
`POST /v1/models/<name>:predict` with `{"instances": [...]}` (row format) or `{"inputs": ...}` (columnar).
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
from collections.abc import Iterable, Sequence
from typing import Any

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers TF.Text ops, as TF Serving builds do)
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

from models.errors import UserError
from models.names import EXAMPLES_INPUT, SERVING_DEFAULT, SERVING_TF_EXAMPLE
from models.serving.signatures import TEXT_INPUT, TEXT_PAIR_INPUT

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
# The tensorflow_text ops TF Serving's model server provides: SUPPORTED_TENSORFLOW_OPS in
# tensorflow_serving/model_servers/BUILD links `@org_tensorflow_text//tensorflow_text:ops_lib`, pinned to
# tensorflow_text v2.20.0 in tensorflow_serving/workspace.bzl (tensorflow/serving 9d981c5, 2026-07-30); these
# are the ops that target's deps register at v2.20.0 (REGISTER_OP and the TF op shims' kOpName under
# tensorflow_text/core). serving_contract_test checks the installed tensorflow_text registers each of them.
TEXT_OPS_IN_TF_SERVING = frozenset(
    {
        "CaseFoldUTF8", "ConstrainedSequence", "FastBertNormalize", "FastWordpieceTokenizeWithOffsets",
        "FindSourceOffsets", "MaxSpanningTree", "NormalizeUTF8", "NormalizeUTF8WithOffsetsMap", "PhraseTokenize",
        "RegexSplitWithOffsets", "RougeL", "SentenceFragments", "SentenceFragmentsV2", "SentencepieceDetokenizeOp",
        "SentencepieceIdToStringOp", "SentencepieceOp", "SentencepieceStringToIdOp", "SentencepieceTokenizeOp",
        "SentencepieceTokenizeWithOffsetsOp", "SentencepieceVocabSizeOp", "SplitMergeTokenizeWithOffsets",
        "TFText>BoiseTagsToOffsets", "TFText>ByteSplitByOffsets", "TFText>ByteSplitWithOffsets",
        "TFText>FastSentencepieceDetokenize", "TFText>FastSentencepieceTokenize", "TFText>FastWordpieceDetokenize",
        "TFText>NgramsStringJoin", "TFText>OffsetsToBoiseTags", "TFText>PhraseDetokenize",
        "TFText>RoundRobinGenerateMasks", "TFText>RoundRobinTrim", "TFText>Utf8Binarize",
        "TFText>WhitespaceTokenizeWithOffsetsV2", "TokenizerFromLogits", "UnicodeScriptTokenizeWithOffsets",
        "WhitespaceTokenizeWithOffsets", "WordpieceTokenizeWithOffsets",
    }
)  # fmt: skip
WARMUP_TEXTS = ("a warm, funny and moving film", "")


class BadRequestError(UserError, ValueError):
    """A request TF Serving would reject with 400; the message says why."""


class TooManyRowsError(BadRequestError):
    """More instances than one request may carry (a 413): counted before any row is converted."""


def graph_ops(export_dir: str) -> set[str]:
    """Every op type in the SavedModel's graphs and functions (what a server must be able to run)."""
    with tf.io.gfile.GFile(os.path.join(export_dir, "saved_model.pb"), "rb") as handle:
        saved_model = saved_model_pb2.SavedModel.FromString(handle.read())
    ops, functions = set(), set()
    for meta_graph in saved_model.meta_graphs:
        ops |= {node.op for node in meta_graph.graph_def.node}
        for function in meta_graph.graph_def.library.function:
            functions.add(function.signature.name)
            ops |= {node.op for node in function.node_def}
    return ops - functions


def is_core_op(op: str) -> bool:
    """TensorFlow's own ops are listed in tf.raw_ops; ops loaded from libraries (tensorflow_text) are not."""
    return hasattr(tf.raw_ops, op)


def unsupported_ops(ops: Iterable[str]) -> list[str]:
    """Ops neither in TensorFlow core nor among the tensorflow_text ops TF Serving provides."""
    return sorted(op for op in ops if not is_core_op(op) and op not in TEXT_OPS_IN_TF_SERVING)


def serialized_example(features: dict[str, Any]) -> bytes:
    """A tf.Example of string or integer features, serialized: what serving_tf_example and transform_features take."""
    feature = {}
    for key, value in features.items():
        values = value if isinstance(value, list) else [value]
        if all(isinstance(v, str) for v in values):
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))
        elif all(isinstance(v, int) for v in values):
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        else:
            raise BadRequestError(f"example feature '{key}' must hold strings or integers, got {value!r}")
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def request_to_call(
    payload: dict[str, Any], text_inputs: Sequence[str] = (TEXT_INPUT,)
) -> tuple[str, dict[str, tf.Tensor]]:
    """Maps a TF Serving REST body onto (signature name, keyword tensors): request_rows' columns as tensors."""
    signature, columns = request_rows(payload, text_inputs)
    return signature, {name: tf.constant(values, dtype=tf.string) for name, values in columns.items()}


def request_rows(
    payload: Any, text_inputs: Sequence[str] = (TEXT_INPUT,), max_rows: int | None = None
) -> tuple[str, dict[str, list[bytes]]]:
    """Maps a TF Serving REST body onto (signature name, {input: UTF-8 bytes per row}), refusing every
    malformed body with a BadRequestError that says what is wrong (never an error from deeper down).

    `text_inputs` are serving_default's inputs: (text,) or, for sentence pairs, (text, text_pair), which
    TF Serving's row format sends as objects {"text": ..., "text_pair": ...} and its columnar format as lists.
    Every text is encoded here, so one that is no Unicode (a lone surrogate: half an emoji, valid JSON) is this
    request's 400 and never reaches a model call shared with others. More than `max_rows` instances is a
    TooManyRowsError, raised before any row is converted.
    """
    if not isinstance(payload, dict):
        raise BadRequestError("the request body must be a JSON object")
    signature = payload.get("signature_name", SERVING_DEFAULT)
    if not isinstance(signature, str):
        raise BadRequestError('"signature_name" must be a string')
    if "examples" in payload:  # classify/regress-style: feature dicts, sent as serialized tf.Examples
        examples = payload["examples"]
        if not isinstance(examples, list) or not all(isinstance(e, dict) for e in examples):
            raise BadRequestError('"examples" must be a list of {feature: value} objects')
        _check_count(len(examples), max_rows)
        try:
            serialized = [serialized_example(e) for e in examples]
        except (TypeError, ValueError) as error:
            raise BadRequestError(f'an "examples" feature is not a string or a list of strings: {error}') from None
        signature = payload.get("signature_name", SERVING_TF_EXAMPLE)
        checked = _checked(serialized, text_inputs) if signature == SERVING_TF_EXAMPLE else serialized
        return signature, {EXAMPLES_INPUT: checked}
    rows = payload.get("instances", payload.get("inputs"))
    names = tuple(text_inputs) if signature == SERVING_DEFAULT else (EXAMPLES_INPUT,)
    if isinstance(rows, dict):  # columnar {"inputs": {"text": [...], "text_pair": [...]}}
        if set(rows) != set(names) or not all(isinstance(v, list) for v in rows.values()):
            raise BadRequestError(f'columnar "inputs" must map {list(names)} to lists, got keys {sorted(rows)}')
        lengths = {n: len(rows[n]) for n in names}
        if len(set(lengths.values())) > 1:
            raise BadRequestError(f'columnar "inputs" must hold lists of one length, got {lengths}')
        rows = [dict(zip(names, values, strict=True)) for values in zip(*(rows[n] for n in names), strict=True)]
    if not isinstance(rows, list):
        raise BadRequestError('the request needs "instances" (a list), "inputs" or "examples"')
    _check_count(len(rows), max_rows)
    if len(names) > 1:
        return signature, _named_rows(rows, names)
    (name,) = names
    values = [_utf8(_row_value(row, name), index) for index, row in enumerate(rows)]
    return signature, {name: _checked(values, text_inputs) if signature == SERVING_TF_EXAMPLE else values}


def _checked(serialized: list[bytes], text_inputs: Sequence[str]) -> list[bytes]:
    """Serialized tf.Examples, each refused here (naming its row) unless it parses and holds one string per text
    input: the signature's ParseExample would otherwise fail the whole model call it shares with other requests."""
    for index, value in enumerate(serialized):
        try:
            features = tf.train.Example.FromString(value).features.feature
        except Exception:  # protobuf's DecodeError, whichever implementation is loaded
            raise BadRequestError(f"example {index} is not a serialized tf.Example") from None
        for name in text_inputs:
            if name not in features or len(features[name].bytes_list.value) != 1:
                raise BadRequestError(f"example {index} must hold one string in its feature '{name}'")
        if twice := _set_twice(value, text_inputs):
            raise BadRequestError(f"example {index} sets its feature '{twice}' more than once")
    return serialized


def _set_twice(serialized: bytes, text_inputs: Sequence[str]) -> str | None:
    """The text input an Example sets more than once, on the wire, or None. Protobuf keeps the last of a map entry
    or a oneof set twice, so the parsed Example looks whole, while TensorFlow's ParseExample fails the call on a
    Feature holding an int64_list before its bytes_list; read as repeated fields, every occurrence shows."""
    wanted, seen = set(text_inputs), set()
    raw_example, raw_feature = _raw_classes()
    for features in raw_example.FromString(serialized).features:
        for entry in features.feature:
            if entry.key in wanted:
                kinds = [raw_feature.FromString(v) for v in entry.value]
                occurrences = sum(len(k.bytes_list) + len(k.float_list) + len(k.int64_list) for k in kinds)
                if entry.key in seen or len(entry.value) != 1 or occurrences != 1:
                    return entry.key
                seen.add(entry.key)
    return None


@functools.cache
def _raw_classes() -> tuple[type, type]:
    """tf.Example's wire layout with every field repeated (Example.features, Features' map entries, an entry's value
    and each of a Feature's lists): messages whose parse keeps what protobuf's own merges."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    repeated, as_bytes, as_message = (
        descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
        descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
    )
    file = descriptor_pb2.FileDescriptorProto(name="hftfx_raw_example.proto", package="hftfx_raw", syntax="proto3")
    feature = file.message_type.add(name="Feature")
    for number, name in ((1, "bytes_list"), (2, "float_list"), (3, "int64_list")):
        feature.field.add(name=name, number=number, label=repeated, type=as_bytes)
    entry = file.message_type.add(name="Entry")
    entry.field.add(name="key", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    entry.field.add(name="value", number=2, label=repeated, type=as_bytes)
    features = file.message_type.add(name="Features")
    features.field.add(name="feature", number=1, label=repeated, type=as_message, type_name=".hftfx_raw.Entry")
    example = file.message_type.add(name="Example")
    example.field.add(name="features", number=1, label=repeated, type=as_message, type_name=".hftfx_raw.Features")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    get = message_factory.GetMessageClass
    return get(pool.FindMessageTypeByName("hftfx_raw.Example")), get(pool.FindMessageTypeByName("hftfx_raw.Feature"))


def _check_count(rows: int, max_rows: int | None) -> None:
    if max_rows is not None and rows > max_rows:
        raise TooManyRowsError(f"{rows} instances in one request; at most {max_rows}: split it")


def _utf8(value: str | bytes, index: int) -> bytes:
    """A text as the model's string tensor holds it; a string with no UTF-8 form is refused naming its row."""
    if isinstance(value, bytes):
        return value
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise BadRequestError(
            f"instance {index} is not valid Unicode: {error.reason} at character {error.start} "
            f"({value[error.start : error.end]!r}, half of a surrogate pair); send the whole character, or the "
            'text\'s bytes as {"b64": ...}'
        ) from None


def _row_value(row: Any, name: str) -> str | bytes:
    """One instance of a one-input signature: a string, {"b64": ...} or {name: string}."""
    if isinstance(row, dict) and set(row) == {"b64"}:
        if not isinstance(row["b64"], str):
            raise BadRequestError(f'"b64" must hold a base64 string, got {type(row["b64"]).__name__}')
        try:
            return base64.b64decode(row["b64"], validate=True)
        except binascii.Error as error:
            raise BadRequestError(f'"b64" value {row["b64"][:40]!r} is not base64: {error}') from None
    value = row.get(name) if isinstance(row, dict) else row
    if isinstance(value, str):
        return value
    raise BadRequestError(f"instance {str(row)[:80]} is not a string (or {{\"b64\": ...}}) for input '{name}'")


def _named_rows(rows: list, names: Sequence[str]) -> dict[str, list[bytes]]:
    """Row-format instances of a signature with several inputs: every row an object holding each of them."""
    columns: dict[str, list[bytes]] = {name: [] for name in names}
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != set(names) or not all(isinstance(row[n], str) for n in names):
            raise BadRequestError(f"instance {str(row)[:80]} must be an object with the strings {list(names)}")
        for name in names:
            columns[name].append(_utf8(row[name], index))
    return columns


def text_inputs(model) -> tuple[str, ...]:
    """serving_default's inputs, in segment order: (text,) or (text, text_pair)."""
    _, inputs = model.signatures[SERVING_DEFAULT].structured_input_signature
    return tuple(n for n in (TEXT_INPUT, TEXT_PAIR_INPUT) if n in inputs)


def predict(model, payload: dict[str, Any]) -> dict[str, Any]:
    """What TF Serving's REST predict answers, row format: {"predictions": [{output: value}, ...]}."""
    signature_name, inputs = request_to_call(payload, text_inputs(model))
    if signature_name not in model.signatures:
        raise BadRequestError(f"no signature '{signature_name}'; the model has {sorted(model.signatures)}")
    return {"predictions": prediction_rows(model.signatures[signature_name](**inputs))}


def prediction_rows(outputs: dict[str, tf.Tensor]) -> list[dict[str, Any]]:
    """A signature's output tensors as TF Serving's row-format predictions: one {output: value} per row."""
    columns = {key: _decoded(value.numpy().tolist()) for key, value in outputs.items()}
    rows = len(next(iter(columns.values()))) if columns else 0
    return [{k: columns[k][i] for k in columns} for i in range(rows)]


def _decoded(value):
    """String tensors of any rank as JSON strings, as TF Serving's REST API writes them."""
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value.decode("utf-8") if isinstance(value, bytes) else value


def warmup_logs(
    text_inputs: Sequence[str] = (TEXT_INPUT,), texts: Sequence[str] = WARMUP_TEXTS
) -> list[prediction_log_pb2.PredictionLog]:
    """Warm-up requests TF Serving replays at load: one text, a batch of 32, and one tf.Example (each text
    input gets the same texts, so pair models warm up too)."""
    logs = []
    batches = [
        (SERVING_DEFAULT, {name: [texts[0]] for name in text_inputs}),
        (SERVING_DEFAULT, {name: [texts[i % len(texts)] for i in range(32)] for name in text_inputs}),
        (SERVING_TF_EXAMPLE, {EXAMPLES_INPUT: [serialized_example({name: texts[0] for name in text_inputs})]}),
    ]
    for signature, inputs in batches:
        request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=signature))
        for name, values in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(values, dtype=tf.string))
        logs.append(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request)))
    return logs


def write_warmup_requests(export_dir: str, text_inputs: Sequence[str] = (TEXT_INPUT,)) -> str:
    path = os.path.join(export_dir, WARMUP_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        for log in warmup_logs(text_inputs):
            writer.write(log.SerializeToString())
    return path


def replay_warmup_requests(model, export_dir: str) -> int:
    """Runs the warm-up file against the model the way TF Serving does at load; returns the count."""
    count = 0
    for record in tf.data.TFRecordDataset(os.path.join(export_dir, WARMUP_FILE)):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
        model.signatures[request.model_spec.signature_name](**{k: tf.constant(v) for k, v in inputs.items()})
        count += 1
    return count

"""preprocessing_fn as the Transform traces it: fixed-length inputs plus the features the statistics read."""

import tensorflow as tf

from components.transform.config import TransformSettings
from components.transform.module import preprocessing_fn
from models.names import LENGTH_BUCKET, TEXT_FEATURE, TOKEN_COUNT, TRUNCATED, UNKNOWN_TOKENS
from models.training.config import ModelConfig


def _settings(model_dir) -> dict:
    model = ModelConfig(name=str(model_dir), max_seq_length=8)
    return TransformSettings(model=model, length_slice_edges=(4,)).to_custom_config()


def test_unknown_tokens_count_the_words_the_vocab_cannot_represent(tiny_bert_dir):
    texts = ["a fine film", "a \U0001f99c and a \U0001fab8 film", ""]
    config = _settings(tiny_bert_dir)
    with tf.Graph().as_default():
        outputs = preprocessing_fn({TEXT_FEATURE: tf.constant([[t] for t in texts])}, config)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.tables_initializer())
            values = session.run(outputs)
    assert values[UNKNOWN_TOKENS].tolist() == [0, 2, 0]
    assert values[TOKEN_COUNT].tolist() == [3, 6, 0]
    assert values[TRUNCATED].tolist() == [0, 0, 0]
    assert values[LENGTH_BUCKET].tolist() == [b"0-4", b"5+", b"0-4"]


def test_the_transform_graph_carries_its_vocab_and_loads_where_the_model_folder_is_gone(tiny_bert_dir, tmp_path):
    """TFT's own TF2 export (what the Transform component runs), then the graph loaded with the model folder it
    read the vocab from deleted: a constant path made every exported model read the vocab at the training
    machine's path (found when the Kubeflow spec's export was served outside the image it trained in)."""
    import shutil

    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    model = shutil.copytree(tiny_bert_dir, tmp_path / "model")
    config = _settings(model)
    spec = {TEXT_FEATURE: tf.io.FixedLenFeature([1], tf.string)}
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))
    rows = [{TEXT_FEATURE: [b"a fine film"]}, {TEXT_FEATURE: [b"a dull one"]}]
    with tft_beam.Context(temp_dir=str(tmp_path / "tmp"), force_tf_compat_v1=False):
        _, transform_fn = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing_fn(inputs, config)
        )
        _ = transform_fn | tft_beam.WriteTransformFn(str(tmp_path / "graph"))
    shutil.rmtree(model)

    graph = tmp_path / "graph" / "transform_fn"
    assert (graph / "assets" / "vocab.txt").is_file()
    layer = tft.TFTransformOutput(str(tmp_path / "graph")).transform_features_layer()
    out = layer({TEXT_FEATURE: tf.constant([["a fine film"]])})
    assert out[TOKEN_COUNT].numpy().tolist() == [3]
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel.FromString((graph / "saved_model.pb").read_bytes())
    library = saved.meta_graphs[0].graph_def.library.function
    constants = [v for f in library for n in f.node_def if n.op == "Const" for v in n.attr["value"].tensor.string_val]
    assert not [v for v in constants if str(model).encode() in v]  # (a table's shared_name may still quote it)

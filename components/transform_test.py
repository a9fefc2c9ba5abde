"""preprocessing_fn as the Transform traces it: fixed-length inputs plus the features the statistics read."""

import tensorflow as tf

from components.transform import preprocessing_fn, transform_custom_config
from models.contract import LENGTH_BUCKET, TEXT_FEATURE, TOKEN_COUNT, TRUNCATED, UNKNOWN_TOKENS


def test_unknown_tokens_count_the_words_the_vocab_cannot_represent(tiny_bert_dir):
    texts = ["a fine film", "a \U0001f99c and a \U0001fab8 film", ""]
    config = transform_custom_config(str(tiny_bert_dir), None, max_seq_length=8, length_buckets=(4,))
    with tf.Graph().as_default():
        outputs = preprocessing_fn({TEXT_FEATURE: tf.constant([[t] for t in texts])}, config)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.tables_initializer())
            values = session.run(outputs)
    assert values[UNKNOWN_TOKENS].tolist() == [0, 2, 0]
    assert values[TOKEN_COUNT].tolist() == [3, 6, 0]
    assert values[TRUNCATED].tolist() == [0, 0, 0]
    assert values[LENGTH_BUCKET].tolist() == [b"0-4", b"5+", b"0-4"]

"""The contract between stages: feature names, the model's inputs, signature names, artifact properties.

Every stage takes these facts from here and from nowhere else.

Raw examples (written by the ExampleGen, parsed by Transform and the serving signatures):
`text` (bytes), `text_pair` (bytes; sentence-pair datasets only), `label` (int64 id 0..K-1) and
`label_name` (bytes, so statistics and slices show names rather than ids). The label set is the ordered list
of names whose positions are the ids: declared in `dataset.label_names` (or probed into it before the run),
recorded on the examples artifact, given to the Trainer and the Evaluator from the same config.

Transformed examples (written by the Transform, read by the Trainer, recomputed in the serving graph): the
model's inputs, fixed-length, plus per-text facts that statistics and evaluation slices read.
"""

from __future__ import annotations

# ---- raw examples -------------------------------------------------------------------------------------------
TEXT_FEATURE = "text"
TEXT_PAIR_FEATURE = "text_pair"
LABEL_FEATURE = "label"
LABEL_NAME_FEATURE = "label_name"
TEXT_FEATURES = (TEXT_FEATURE, TEXT_PAIR_FEATURE)  # the texts a model reads, in segment order
LABEL_FEATURES = (LABEL_FEATURE, LABEL_NAME_FEATURE)  # what serving requests never carry

# evaluation.slice_columns: the user's columns the ExampleGen carries as strings, for TFMA's slices only (never a
# model input, never in a serving request); a row without a value is in this slice.
MISSING_SLICE_VALUE = "(missing)"

# ---- transformed examples: the model's inputs ---------------------------------------------------------------
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"  # 1 for tokens, 0 for padding: what stages other than the model read
TOKEN_TYPE_IDS = "token_type_ids"  # only for models whose tokenizer lists it among its model_input_names
MODEL_INPUT_FEATURES = (INPUT_IDS, ATTENTION_MASK, TOKEN_TYPE_IDS)
# model.long_texts: windows: each input above holds a document's windows side by side ([count x width]), and
# this [count] mask says which of them hold its text (the rest are padding windows, never trained or answered).
WINDOW_MASK = "window_mask"

# training.packing: a training batch's texts laid end to end in rows (models/training/packing.py packs them). The
# inputs above are then [rows, width]; these say where each text sits. Never in the examples or a serving request.
SEGMENT_IDS = "segment_ids"  # [rows, width]: the text a token belongs to (its index in the batch + 1); 0: padding
POSITION_IDS = "position_ids"  # [rows, width]: each token's position in its own text
TEXT_ROWS = "text_rows"  # [texts]: the row each text of the batch sits in
TEXT_STARTS = "text_starts"  # [texts]: where in that row it starts
TEXT_LENGTHS = "text_lengths"  # [texts]: its tokens, special tokens included

# ---- transformed examples: per-text facts -------------------------------------------------------------------
TOKEN_COUNT = "token_count"  # tokens before truncation, special tokens excluded
TRUNCATED = "truncated"  # 1 where tokens were cut to fit model.max_seq_length
UNKNOWN_TOKENS = "unknown_tokens"  # kept tokens that are [UNK]
LENGTH_BUCKET = "length_bucket"  # "0-16", "17-32", "33+": evaluation.length_slice_edges as slice names
SLICE_FEATURES = (LENGTH_BUCKET, TOKEN_COUNT, TRUNCATED)  # what TFMA slices the test split on
# Names the examples use: a user's slice column cannot take one.
RESERVED_FEATURES = (
    *TEXT_FEATURES,
    *LABEL_FEATURES,
    *MODEL_INPUT_FEATURES,
    WINDOW_MASK,
    *SLICE_FEATURES,
    UNKNOWN_TOKENS,
)

# ---- the exported model's signatures (models/serving/signatures.py builds them) ------------------------------------
SERVING_DEFAULT = "serving_default"  # raw texts -> probabilities, label_id, label, confidence
SERVING_TF_EXAMPLE = "serving_tf_example"  # serialized tf.Examples -> the same
SERVING_EVALUATOR = "serving_evaluator"  # tf.Examples -> POSITIVE_SCORE (binary) or PROBABILITIES, for TFMA
TRANSFORM_FEATURES = "transform_features"  # tf.Examples -> SLICE_FEATURES
REPRESENTATION = "representation"  # raw texts -> the encoder's mean hidden state per text (hftfx monitor's drift)
EXAMPLES_INPUT = "examples"
POSITIVE_SCORE = "positive_score"
PROBABILITIES = "probabilities"

# ---- the examples artifact's custom properties (the ExampleGen writes them, summaries read them) ----------
LABEL_NAMES_PROPERTY = "label_names"
FINGERPRINT_PROPERTY = "dataset_fingerprint"
SPLIT_COUNTS_PROPERTY = "split_counts"
LABEL_COUNTS_PROPERTY = "label_counts"  # {split: {label name: examples}}
DROPPED_COUNTS_PROPERTY = "dropped_counts"  # rows left out per split for a missing text or label
SPANS_PROPERTY = "spans"  # the window of spans read, as JSON; the artifact's `span` is the newest of them
INPUT_FINGERPRINT_PROPERTY = "input_fingerprint"

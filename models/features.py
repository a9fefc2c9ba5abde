"""The contract between stages: the names of the examples' features. Every stage imports them from here.

Raw examples (written by the ExampleGen, parsed by Transform and the serving signatures):
`text` (bytes), `text_pair` (bytes; sentence-pair datasets only), `label` (int64 id 0..K-1) and
`label_name` (bytes, so statistics and slices show names rather than ids).
Transformed examples add the model's inputs; ATTENTION_MASK (1 for tokens, 0 for padding) is the one stages
other than the model read, to see how long each row really is.
"""

from __future__ import annotations

TEXT_FEATURE = "text"
TEXT_PAIR_FEATURE = "text_pair"
LABEL_FEATURE = "label"
LABEL_NAME_FEATURE = "label_name"
TEXT_FEATURES = (TEXT_FEATURE, TEXT_PAIR_FEATURE)  # the texts a model reads, in segment order
LABEL_FEATURES = (LABEL_FEATURE, LABEL_NAME_FEATURE)  # what serving requests never carry
ATTENTION_MASK = "attention_mask"

"""Where a model's special tokens go around one text or a pair, and which token type each position gets.

Read from the tokenizer's own post-processor (TemplateProcessing, RobertaProcessing, BertProcessing, ...) by
asking the `tokenizers` library to apply it, so every layout is the model's: BERT's `[CLS] a [SEP] b [SEP]`,
RoBERTa's and MPNet's `<s> a </s></s> b </s>`, Funnel's `<cls>` with token type 2.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Slot:
    """One place of the layout: a special token (segment None) or a text's tokens (segment 0 or 1)."""

    segment: int | None
    token_id: int
    type_id: int


@dataclasses.dataclass(frozen=True)
class Layout:
    single: tuple[Slot, ...]
    pair: tuple[Slot, ...]

    def special_count(self, pair: bool) -> int:
        return sum(slot.segment is None for slot in (self.pair if pair else self.single))


def read_layout(backend) -> Layout:
    """The layout `backend` (a tokenizers.Tokenizer) gives one text and a pair, as slots."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(backend.to_str())  # a copy without the padding and truncation it may carry
    backend.no_padding()
    backend.no_truncation()
    return Layout(single=_slots(backend.encode("a")), pair=_slots(backend.encode("a", "b")))


def _slots(encoding) -> tuple[Slot, ...]:
    slots: list[Slot] = []
    for token_id, type_id, segment in zip(encoding.ids, encoding.type_ids, encoding.sequence_ids, strict=True):
        if segment is None:
            slots.append(Slot(None, token_id, type_id))
        elif not slots or slots[-1].segment != segment:
            slots.append(Slot(segment, -1, type_id))
    return tuple(slots)


def assemble(
    slots: tuple[Slot, ...], segments: list[tf.RaggedTensor], kept: list[tf.Tensor], length: int, pad_id: int
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Fixed-length input_ids, attention_mask and token_type_ids: the slots in order, each text cut to its
    kept token count, then padding.

    Hand-written as dense position arithmetic: tensorflow_text's combine_segments and pad_model_inputs build
    ragged ops with validation asserts, 40% of the tokenizer's graph building in each trace of preprocessing_fn
    (TFT traces it nine times a run), and run at serving.
    """
    pad = tf.constant(pad_id, tf.int64)
    dense = [segment.to_tensor(default_value=pad, shape=[None, length]) for segment in segments]
    rows = tf.shape(dense[0])[0]
    positions = tf.range(length, dtype=tf.int64)[tf.newaxis, :]
    ids = tf.fill([rows, length], pad)
    type_ids = tf.zeros([rows, length], tf.int64)
    start = tf.zeros([rows, 1], tf.int64)
    for slot in slots:
        size = tf.ones_like(start) if slot.segment is None else tf.cast(kept[slot.segment], tf.int64)[:, tf.newaxis]
        inside = (positions >= start) & (positions < start + size)
        if slot.segment is None:
            value = tf.constant(slot.token_id, tf.int64)
        else:
            offsets = tf.clip_by_value(positions - start, 0, length - 1) + tf.zeros_like(ids)
            value = tf.gather(dense[slot.segment], offsets, batch_dims=1)
        ids = tf.where(inside, value, ids)
        type_ids = tf.where(inside, tf.constant(slot.type_id, tf.int64), type_ids)
        start += size
    return ids, tf.cast(positions < start, tf.int64), type_ids

"""Model FLOPs of an encoder classifier, from its sizes (its family reads them: classifier.encoder_shape).

Counts the matrix multiplications, which are all but a sliver of the work: per layer and token the Q, K, V
and output projections (4 h^2 multiply-adds) and the feed-forward (2 h i), per layer and token pair the
attention scores and their weighting of V (2 h), per example the pooler and the head (h^2 + h K). A
multiply-add is 2 FLOPs; a training step is forward + backward = 3x the forward pass (the usual accounting,
as in the PaLM / Megatron MFU papers), less the first layer's input gradients through Q, K and V when the
embeddings are frozen (nothing below them trains, so TensorFlow does not compute them). Embedding lookups,
softmax, layer norm and the optimizer are left out, so utilization against the matmul peak is, if anything,
understated.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class EncoderShape:
    layers: int
    hidden: int
    intermediate: int
    heads: int
    num_labels: int
    embeddings_trained: bool = True
    # matrices of intermediate width per feed-forward: 2 (up, down), 3 with a gated unit (GeGLU, SwiGLU)
    feed_forward_matrices: int = 2
    vocab: int = 0  # the word embeddings' rows: weights the FLOP count leaves out, and the memory estimate counts

    @property
    def layer_matrix_weights(self) -> int:
        """Weights of the layers' matrices (attention's four projections, the feed-forward ones): a token's forward
        pass multiplies and adds each once."""
        h, i = self.hidden, self.intermediate
        return self.layers * (4 * h * h + self.feed_forward_matrices * h * i)

    def forward_flops(self, examples: float, padded_tokens: float, padded_token_pairs: float) -> float:
        """FLOPs of a forward pass over batches holding these totals: examples, Σ batch x width (tokens,
        padding included: it is computed) and Σ batch x width^2 (attention's token pairs)."""
        h = self.hidden
        per_token = 2 * self.layer_matrix_weights
        per_token_pair = self.layers * 2 * 2 * h
        per_example = 2 * (h * h + h * self.num_labels)
        return per_token * padded_tokens + per_token_pair * padded_token_pairs + per_example * examples

    def training_flops(self, examples: float, padded_tokens: float, padded_token_pairs: float) -> float:
        skipped = 0 if self.embeddings_trained else 3 * 2 * self.hidden * self.hidden * padded_tokens
        return 3 * self.forward_flops(examples, padded_tokens, padded_token_pairs) - skipped


@dataclasses.dataclass
class BatchShapes:
    """Running totals of the batches a training loop consumed, in order."""

    examples: int = 0
    padded_tokens: int = 0
    padded_token_pairs: int = 0
    real_tokens: int = 0

    @classmethod
    def of(cls, records) -> BatchShapes:
        """The totals of (rows, width, real tokens[, texts]) records, as the Trainer's meter notes each batch."""
        totals = cls()
        for record in records:
            totals.add(*record)
        return totals

    def add(self, batch: int, width: int, real_tokens: int, texts: int | None = None) -> None:
        """`batch` rows of `width`; `texts` where packed rows hold more than one (training.packing)."""
        self.examples += batch if texts is None else texts
        self.padded_tokens += batch * width
        self.padded_token_pairs += batch * width * width
        self.real_tokens += real_tokens

    def training_flops(self, shape: EncoderShape) -> float:
        return shape.training_flops(self.examples, self.padded_tokens, self.padded_token_pairs)

    @property
    def padding_share(self) -> float:
        return 1 - self.real_tokens / self.padded_tokens if self.padded_tokens else 0.0

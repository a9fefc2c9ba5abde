"""What a training step holds in memory, estimated from the model's sizes before anything is built, so `--check`
says whether the chosen width and batch fit this machine (a run past its memory is killed by the kernel with no word
from the run, minutes in).

A layer keeps s·b·h·(34 + 5·a·s/h) bytes of activations in 16-bit (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models"), twice that in fp32; the attention part (5·a·s² per sequence) is not
kept where the encoders recompute it (models/encoders/attention.py: past RECOMPUTE_ABOVE_BYTES a layer), but one
head's weights still live while it runs (16 bytes a pair), and past QUERY_CHUNK tokens one piece of queries'
weights and their gradients (models/encoders/long_attention.py). Training holds 16 bytes a parameter (value, gradient,
AdamW's two moments), calibrated by ACTIVATION_FACTOR and PIECES_ALIVE below. Against measured peaks (peak RSS of
the measuring process): MiniLM at width 512, batch 32: ~6.1 GiB estimated vs 4.5 measured (attention recomputed a
head at a time, and the feed-forward's activation: activations.DenseAfterActivation; 6.0 with every head at once, 6.6
before the activation was recomputed, 7.4 before GELU's backward pass kept its input alone: activations.gelu);
the ModernBERT-base shape at 512, batch 2: ~7.7 vs 5.9; at 8,192, batch 1: ~24 vs killed past 21.5 on a 24 GiB
machine, and with its blocks recomputed ~6.3 vs 5.9 (the step alone; 6.4 in the Trainer of a whole `hftfx run`).
It errs high where it errs, as a warning should.

With the pieces unrolled (the way XLA takes them) that step peaked at 8.4 GiB, of which TensorFlow's own count of
live tensors was 4.5 (tf.config.experimental.get_memory_info; 2.6 after the step: the weights, AdamW's moments and
what the step keeps); the rest is the process (0.6 for TensorFlow itself) and the pool oneDNN's CPU allocator grows
and never gives back (RSS stays at the peak after the step). Measured 2026-11-28: glibc's malloc instead
(TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1) peaked the same (8.5) with a first step 1.7x slower, TensorFlow without oneDNN
the same (8.6) at 1.9x.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from models.encoders import long_attention
from models.encoders.activations import activation_recomputed
from models.encoders.attention import attention_recomputed, kept_bytes
from models.hardware.flops import EncoderShape

GIB = 2**30
# TensorFlow, TFX and the Trainer's input pipeline around the model's steps: the LocalDagRunner process held 1.6-1.9
# GiB as the Trainer's first step began (600 long pages, MiniLM, 2026-11-28)
PROCESS_BASE_BYTES = 2 * GIB
FITS_SHARE = 0.9  # of the machine's memory a step may take: the kernel, page cache and the rest keep the remainder
# Measured against the formula: our layers keep 1.5-2x Korthikanti's count (dropout masks and float32 copies of Keras'
# layers; the ModernBERT-base shape at 8,192 tokens kept 0.6 GiB a layer over its first seven), and training past
# QUERY_CHUNK holds one piece's weights and gradients at a time (long_attention.looped_attention; the unrolled pieces
# held about three). The high end: that shape's 22 layers at 8,192, batch 1, were killed at 21.5 GiB in fit.
ACTIVATION_FACTOR, PIECES_ALIVE = 2.0, 1
# With blocks recomputed (layers.run_block), the backward pass holds a block's recomputed activations and their
# gradients. Measured: the ModernBERT-base shape at 8,192 tokens, batch 1, peaked at 5.9 GiB (estimate 6.3); 8.4-8.6
# with the pieces unrolled, 11.2 before their backward pass stopped computing every piece's weight gradient at once.
BLOCKS_ALIVE_RECOMPUTED = 1


@dataclasses.dataclass(frozen=True)
class StepMemory:
    weights: int  # parameters with their gradients and AdamW's moments
    activations: int  # what every layer keeps for the backward pass
    attention: int  # attention weights: every layer's where kept, one layer's where recomputed, or one piece's

    @property
    def total(self) -> int:
        return PROCESS_BASE_BYTES + self.weights + self.activations + self.attention

    def describe(self) -> str:
        parts = (self.weights, self.activations, self.attention)
        return (
            f"~{self.total / GIB:.1f} GiB (weights and AdamW {parts[0] / GIB:.1f}, activations {parts[1] / GIB:.1f}, "
            f"attention {parts[2] / GIB:.1f}, the process {PROCESS_BASE_BYTES / GIB:.1f})"
        )


def texts_of(batch: int) -> str:
    """How `--check` and the Trainer name a step's batch: "one text", "16 texts"."""
    return "one text" if batch == 1 else f"{batch:,} texts"


def kept_per_value(shape: EncoderShape, batch: int, width: int) -> int:
    """Korthikanti's 34 bytes a token and hidden unit in 16-bit, less the 8 of GELU's output where a two-matrix
    feed-forward computes it again (activations.DenseAfterActivation, past RECOMPUTE_ACTIVATION_ABOVE_BYTES a layer)."""
    recomputed = shape.feed_forward_matrices == 2 and activation_recomputed(4 * batch * width * shape.intermediate)
    return 26 if recomputed else 34


def step_memory(shape: EncoderShape, batch: int, width: int, recompute_blocks: bool = False) -> StepMemory:
    """A fp32 training step's peak at `batch` texts of `width` tokens; with `recompute_blocks` (layers.run_block)
    every block keeps its input (4 bytes a value) and a few blocks at a time their activations."""
    h, layers, heads = shape.hidden, shape.layers, shape.heads
    parameters = shape.layer_matrix_weights + shape.vocab * h
    one_block = ACTIVATION_FACTOR * 2 * width * batch * h * kept_per_value(shape, batch, width)
    if recompute_blocks:
        activations = layers * 4 * width * batch * h + BLOCKS_ALIVE_RECOMPUTED * one_block
    else:
        activations = layers * one_block
    if width > long_attention.QUERY_CHUNK:  # in pieces of queries: PIECES_ALIVE pieces' weights and gradients
        pieces = PIECES_ALIVE * 16 * batch * heads * long_attention.QUERY_CHUNK * width
        return StepMemory(16 * parameters, int(activations), pieces)
    one_layer_attention = kept_bytes([batch, heads, width])
    kept = not attention_recomputed([batch, heads, width])
    # recomputed: one head at a time (attention.recomputed_attention)
    attention = layers * 2 * 5 * heads * width * width * batch if kept else one_layer_attention // heads
    return StepMemory(16 * parameters, int(activations), attention)


def machine_memory() -> int:
    """This machine's memory in bytes (Linux's MemTotal)."""
    line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal:"))
    return int(line.split()[1]) * 1024


def largest_fitting_batch(shape: EncoderShape, width: int, memory: int, recompute_blocks: bool = False) -> int:
    """The largest batch whose step fits FITS_SHARE of `memory` at `width` (0: not even one text)."""
    batch = 0
    while batch < 4096 and step_memory(shape, batch + 1, width, recompute_blocks).total <= FITS_SHARE * memory:
        batch += 1
    return batch


def recompute_blocks_pays(shape: EncoderShape, batch: int, width: int, memory: int, can_recompute: bool) -> bool:
    """Whether the Trainer recomputes blocks (layers.run_block): where it can exactly and a step keeping every block's
    activations would not fit FITS_SHARE of `memory`. Elsewhere the third more compute buys nothing."""
    return can_recompute and step_memory(shape, batch, width).total > FITS_SHARE * memory

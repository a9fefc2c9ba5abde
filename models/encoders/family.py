"""What a family module answers: the written contract every module in classifier.ARCHITECTURES keeps, so the
classifier, the FLOP count and the recipe ask the family instead of probing it (one test checks every module).

Adding a family is one module keeping this contract, its test beside it, and one line of classifier.ARCHITECTURES.
"""

from __future__ import annotations

from typing import Any, Protocol, get_type_hints, runtime_checkable


@runtime_checkable
class FamilySizes(Protocol):
    """config.json's sizes under one set of names, whatever the family calls them (DistilBERT's dim, n_layers)."""

    vocab: int
    hidden: int
    intermediate: int
    heads: int
    positions: int

    @property
    def layers(self) -> int: ...

    @property
    def activations(self) -> tuple[str, ...]:
        """Every activation config.json names (the blocks', a pooler's or classifier's): each must be one we compute."""

    @property
    def block_dropout(self) -> float | None:
        """The largest dropout inside a block, for families that can recompute blocks (layers.run_block); else None."""


class EncoderFamily(Protocol):
    """A family module: its layers, the names its checkpoints use, and what it says of itself."""

    FEED_FORWARD_MATRICES: int  # matrices of intermediate width a feed-forward holds: 2 (up, down), 3 when gated
    OTHER_PREFIXES: tuple[str, ...]  # checkpoint prefixes besides the encoder's own (older names of the family)
    Sizes: Any  # a FamilySizes dataclass with `of(config)`
    Encoder: Any  # tf_keras layer: (config, name) -> the encoder, yielding its weights in PyTorch names
    Head: Any  # tf_keras layer: (config, labels, name) -> the family's classification head

    def position_limit(self, config: dict) -> int: ...

    def describe(self, sizes: Any) -> str: ...

    def warmup_ratio(self, model_type: str) -> float | None: ...


def _members(protocol: type) -> list[str]:
    names = set(get_type_hints(protocol)) | {
        name for name, value in vars(protocol).items() if not name.startswith("_") and callable(value)
    }
    return sorted(names | {name for name, value in vars(protocol).items() if isinstance(value, property)})


def missing_parts(module) -> list[str]:
    """The contract's parts `module` lacks (its Sizes' included, as 'Sizes.<name>'): empty when it keeps it whole."""
    missing = [name for name in _members(EncoderFamily) if not hasattr(module, name)]
    sizes = getattr(module, "Sizes", None)
    if sizes is None:
        return missing
    fields = set(getattr(sizes, "__dataclass_fields__", {}))  # a dataclass's fields are not class attributes
    wanted = [*_members(FamilySizes), "of"]
    missing += [f"Sizes.{name}" for name in wanted if not (name in fields or hasattr(sizes, name))]
    return missing

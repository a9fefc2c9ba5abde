"""The tokenizer files of an export, written and read back before anything relies on them.

transformers 5's `save_pretrained` writes `tokenizer.json` and `tokenizer_config.json` alone, for every family:
no SentencePiece `.model`, which the in-graph SentencePiece tokenizer runs. So the export also carries the files of
the model folder that the in-graph tokenizer reads (TokenizerSpec.folder_files), and is then read back the way
the publisher, a warm start and a user read it: the in-graph tokenizer's spec from the written folder, and the ids
it and transformers give, compared with the model folder's own. The Trainer does this where it writes the export;
`hftfx run --check` does it on the preflight's sample before anything trains, so a folder that would not read back
stops the run then.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from models.errors import UserError
from models.tokenizers.tokenizer import InGraphTokenizer, load_hf_tokenizer, tokenizer_spec

# Texts every round trip tokenizes besides the caller's: whitespace, accents, scripts, emoji, a long word
PROBE_TEXTS = (
    "",
    " a  b ",
    "Café crème brûlée, naïve résumé",
    "Der Film ist großartig – überraschend und bewegend.",  # noqa: RUF001  (a real dash)
    "この映画はとても面白かったです。",
    "I ❤️ this 🍕 movie 😀🏽",
    "supercalifragilisticexpialidocious",
)
ROUND_TRIP_WIDTH = 512  # wide enough that the sample's ids are compared whole, not only their heads


class TokenizerExportError(UserError, RuntimeError):
    """The tokenizer an export writes does not read back as the model folder's: the run would fail (or serve other
    ids) after training."""


def save_tokenizer(tokenizer_dir: str | Path, max_seq_length: int, destination: str | Path) -> None:
    """The folder's tokenizer as transformers saves it, with `model_max_length` the width the SavedModel truncates
    to, and the files the in-graph tokenizer reads that transformers does not write (the SentencePiece model)."""
    load_hf_tokenizer(tokenizer_dir, model_max_length=max_seq_length).save_pretrained(destination)
    for source in tokenizer_spec(tokenizer_dir).folder_files:
        target = Path(destination, source.name)
        if not target.exists():
            shutil.copyfile(source, target)


def check_read_back(tokenizer_dir: str | Path, exported: str | Path, texts: Sequence[str] = ()) -> None:
    """The exported tokenizer read as the publisher reads it, its in-graph ids and transformers' ids on `texts` (and
    PROBE_TEXTS) equal to the model folder's; TokenizerExportError naming the first difference otherwise. The folder's
    in-graph ids are also held against transformers' own: comparing only in-graph with in-graph would not see a
    tokenizer file that both read wrong (a vocab changed under the temp folder)."""
    texts = [*PROBE_TEXTS, *texts]
    ours = _ids(tokenizer_dir, texts)
    try:
        theirs = _ids(exported, texts)
    except UserError as error:
        raise TokenizerExportError(
            f"the tokenizer the export writes does not read back: {error}. This is a defect of the export "
            "(models/serving/tokenizer_export.py), found before training: please report it"
        ) from error
    differing = _differing(ours["in-graph"], ours["transformers"])
    if differing:
        first = differing[0]
        raise TokenizerExportError(
            f"the in-graph tokenizer of {tokenizer_dir} gives other ids than transformers' on {len(differing)} of "
            f"{len(texts)} texts, first {texts[first][:80]!r}: {ours['in-graph'][first][:12]} vs "
            f"{ours['transformers'][first][:12]}: the model would train and serve on ids its published tokenizer does "
            "not give. This is a defect of the in-graph tokenizer (models/tokenizers/), found before training: please "
            "report it with the text"
        )
    for reader, ids in ours.items():
        differing = _differing(ids, theirs[reader])
        if differing:
            first = differing[0]
            raise TokenizerExportError(
                f"the tokenizer the export writes gives other {reader} ids than {tokenizer_dir}'s on "
                f"{len(differing)} of {len(texts)} texts, first {texts[first][:80]!r}: {ids[first][:12]} vs "
                f"{theirs[reader][first][:12]}. This is a defect of the export (models/serving/tokenizer_export.py), "
                "found before training: please report it"
            )


def _differing(ids: list, other: list) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(ids, other, strict=True)) if a != b]


def check_round_trip(tokenizer_dir: str | Path, texts: Sequence[str], max_seq_length: int) -> None:
    """What the Trainer's export will write of the folder's tokenizer, written to a scratch folder and read back
    (check_read_back): `hftfx run --check`'s guarantee that the publisher can read what the Trainer writes."""
    with tempfile.TemporaryDirectory(prefix="tokenizer-round-trip-") as scratch:
        save_tokenizer(tokenizer_dir, max_seq_length, scratch)
        check_read_back(tokenizer_dir, scratch, texts)


def _ids(tokenizer_dir: str | Path, texts: Sequence[str]) -> dict[str, list[list[int]]]:
    """The ids of `texts` as the folder's in-graph tokenizer and as transformers give them, untruncated up to
    ROUND_TRIP_WIDTH."""
    import tensorflow as tf

    out = InGraphTokenizer(tokenizer_spec(tokenizer_dir), ROUND_TRIP_WIDTH)(tf.constant(list(texts)))
    masks = out["attention_mask"].numpy()
    in_graph = [row[mask > 0].tolist() for row, mask in zip(out["input_ids"].numpy(), masks, strict=True)]
    transformers = load_hf_tokenizer(tokenizer_dir)(list(texts), truncation=True, max_length=ROUND_TRIP_WIDTH)
    return {"in-graph": in_graph, "transformers": transformers["input_ids"]}

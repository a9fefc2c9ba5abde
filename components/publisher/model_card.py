"""The Hugging Face model card (README.md: YAML metadata + text) of a blessed model, from the run's records.

Metadata and text are built with huggingface_hub's own card classes (ModelCardData, EvalResult, ModelCard's
Jinja template), so the model-index is what the Hub parses; `parse_card` reads a card back through the same
classes and fails on metadata the Hub would reject.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from components.transform.tokenization_stats import TokenizationFigures
from models.names import LENGTH_BUCKET, TRUNCATED

EXAMPLE_COUNT = "example_count"  # TFMA's count: the examples column, not a metric row
CARD_SLICES = (LENGTH_BUCKET, TRUNCATED)  # slices the card tables (per-label slices are in the run report)
HEADLINE_METRICS = ("accuracy", "auc", "macro_f1", "precision", "recall")  # in the card's metadata, if measured
CARD_TEMPLATE = """---
{{ card_data }}
---

# {{ title }}

A {{ task_text }} classifier fine-tuned from {{ base_model_text }} by the hf-tfx-pipeline TFX pipeline
`{{ pipeline_name }}` (run `{{ run_id }}`).
Labels, in id order: {{ label_list }}.

## How to use

{% if sentence_transformers -%}
With sentence-transformers (the head reads the mean of the tokens, which no transformers class of this
architecture computes: the folder holds the encoder, the mean pooling and the head's two dense layers, whose output
is the logits):

```python
import torch
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("{{ repo_ref }}")
logits = model.encode({{ sentence_example }}, convert_to_tensor=True)
probabilities = logits.{{ torch_activation }}
```
{% else -%}
With PyTorch and transformers 5 (`model.safetensors` holds the weights in PyTorch's layout, the tokenizer files
are as transformers 5 saves them):

```python
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("{{ repo_ref }}")
model = AutoModelForSequenceClassification.from_pretrained("{{ repo_ref }}")
inputs = tokenizer({{ example_call }}, truncation=True, padding=True, return_tensors="pt")
with torch.no_grad():
    probabilities = model(**inputs).logits.{{ torch_activation }}
```
{% endif -%}
No `tf_model.h5`: the pipeline's own Keras encoder trained this {{ architecture }} model, and no
TensorFlow class of transformers computes it (transformers 5 has no TensorFlow). TensorFlow users serve the
pipeline's SavedModel, which takes raw text.
{{ truncation_text }}

## Data

Dataset: {{ dataset_text }}. Examples per split: {{ split_text }}.{{ dropped_text }}

| label | train | test |
|---|---:|---:|
{% for row in label_rows %}| {{ row[0] }} | {{ row[1] }} | {{ row[2] }} |
{% endfor %}
## Training

{{ recipe_text }}

## Evaluation (test split)

| metric | value |{{ baseline_header }}
|---|---:|{{ baseline_rule }}
{% for row in metric_rows %}| {{ row | join(" | ") }} |
{% endfor %}
{% if slice_rows %}
Per slice (token-count bucket, truncation):

| slice | examples | {{ slice_metrics | join(" | ") }} |
|---|---:|{% for _ in slice_metrics %}---:|{% endfor %}
{% for row in slice_rows %}| {{ row | join(" | ") }} |
{% endfor %}{% endif %}
## Blessing

{{ blessing_text }} Thresholds: {{ thresholds_text }}.

## Intended use and limitations

Classifies {{ input_text }} into the labels above; it was trained and measured on {{ dataset_text }} only,
and its scores mean what they mean on that data. Inputs longer than {{ max_seq_length }} tokens are cut:
{{ tokenization_text }} Scripts seen in the training texts: {{ scripts_text }}; text in other scripts or
languages was not measured.
"""


@dataclasses.dataclass(frozen=True)
class CardFacts:
    """Everything the card says. The pipeline gives the config's part; the publisher reads the rest from the
    run's artifacts (examples, transformed statistics, evaluation, blessing, training record)."""

    title: str
    pipeline_name: str
    run_id: str
    label_names: tuple[str, ...]
    multi_label: bool
    pair: bool
    max_seq_length: int
    base_model: str  # what the config named (hub id, folder or packaged:...)
    base_model_id: str | None  # its Hub id, when it has one
    dataset: str
    dataset_id: str | None
    split_counts: dict[str, int]
    label_counts: dict[str, dict[str, int]]
    dropped_counts: dict[str, int]
    recipe: dict[str, Any]
    metrics: dict[str, float]
    baseline_metrics: dict[str, float]
    slices: dict[str, dict[str, float]]
    blessed: bool
    blessing_reason: str
    thresholds: dict[str, float | None]
    tokenization: dict[str, TokenizationFigures]  # split -> figures
    scripts: dict[str, float]  # Unicode script -> share of letters in a sample of the train texts
    license: str = ""
    language: tuple[str, ...] = ()
    repo_id: str = ""
    head_share: float | None = None  # model.long_texts: head_tail (None: truncate)
    windows: tuple[float, int] | None = None  # model.long_texts: windows: (stride, count)
    base_model_revision: str = ""  # the revision (a hub model's commit, pinned before the run) fine-tuned from
    text_budget: str = ""  # what a text keeps before tokenizing (models/tokenizers/character_budget.py)
    architecture: str = ""  # config.json's model_type
    sentence_transformers: bool = False  # exported in that layout (a mean-pooling head: sentence_transformers_export)


def card_data(facts: CardFacts):
    """The YAML metadata block, with the test metrics as a model-index the Hub shows beside the model."""
    from huggingface_hub import EvalResult, ModelCardData

    results = [
        EvalResult(
            task_type="text-classification",
            task_name="Text Classification",
            dataset_type=facts.dataset_id or facts.dataset,
            dataset_name=facts.dataset,
            dataset_split="test",
            metric_type=name,
            metric_name=name,
            metric_value=round(facts.metrics[name], 4),
        )
        for name in HEADLINE_METRICS
        if name in facts.metrics
    ]
    return ModelCardData(
        language=list(facts.language) or None,
        license=facts.license or None,
        library_name="sentence-transformers" if facts.sentence_transformers else "transformers",
        pipeline_tag="text-classification",
        tags=["tensorflow", "tfx", "multi-label" if facts.multi_label else "single-label"],
        base_model=facts.base_model_id,
        datasets=[facts.dataset_id] if facts.dataset_id else None,
        metrics=[r.metric_type for r in results] or None,
        model_name=facts.repo_id or facts.title,
        eval_results=results or None,
    )


def build_model_card(facts: CardFacts):
    """The card as huggingface_hub's ModelCard (its `.content` is the README.md text)."""
    from huggingface_hub import ModelCard

    return ModelCard.from_template(card_data(facts), template_str=CARD_TEMPLATE, **_text_fields(facts))


def parse_card(text: str):
    """A card read back through huggingface_hub, failing on metadata the Hub's model-index parser rejects."""
    from huggingface_hub import ModelCard

    return ModelCard(text, ignore_metadata_errors=False)


def _truncation_text(facts: CardFacts) -> str:
    """How a long input is cut, and how a transformers user gets the export's answer for it."""
    budget = (
        f" Before tokenizing, the export cuts a text to {facts.text_budget}, as training did; that holds every "
        "token the model reads, and bounds the work one request can ask of a server."
        if facts.text_budget
        else ""
    )
    return _cut_text(facts) + budget


def _cut_text(facts: CardFacts) -> str:
    if facts.windows is not None:
        stride, count = facts.windows
        return (
            f"The run's TF Serving export (a SavedModel with the tokenizer in its graph) splits a text longer than "
            f"{facts.max_seq_length} tokens into up to {count} overlapping windows (each starting {stride:.0%} of a "
            "window after the previous one), as the model was trained, and answers the mean of the windows' "
            f"probabilities. With transformers, tokenize with `truncation=True, max_length={facts.max_seq_length}, "
            "return_overflowing_tokens=True` and a `stride` of the overlap, and average the windows' probabilities."
        )
    if facts.head_share is None:
        return (
            f"`truncation=True` cuts at {facts.max_seq_length} tokens, as the run's TF Serving export (a SavedModel "
            "with the tokenizer in its graph) does: the two give the same probabilities."
        )
    return (
        f"The run's TF Serving export (a SavedModel with the tokenizer in its graph) keeps the head and the tail of "
        f"a text longer than {facts.max_seq_length} tokens: {facts.head_share:.0%} of the kept tokens from its "
        "start, the rest from its end, as the model was trained. `truncation=True` keeps the start only; for the "
        "export's probabilities on such a text, tokenize it without truncation and keep the same head and tail."
    )


def _text_fields(facts: CardFacts) -> dict[str, Any]:
    metric_names = sorted(name for name in facts.metrics if name != EXAMPLE_COUNT)
    slices = {name: values for name, values in facts.slices.items() if name.startswith(CARD_SLICES)}
    baseline = bool(facts.baseline_metrics)
    slice_metrics = [m for m in ("accuracy", "auc") if any(m in v for v in slices.values())]
    return {
        "title": facts.title,
        "pipeline_name": facts.pipeline_name,
        "run_id": facts.run_id,
        "task_text": ("multi-label " if facts.multi_label else "") + ("sentence-pair" if facts.pair else "text"),
        "input_text": "pairs of texts" if facts.pair else "texts",
        "base_model_text": f"`{facts.base_model_id or facts.base_model}`"
        + (f" at revision `{facts.base_model_revision}`" if facts.base_model_revision else ""),
        "label_list": ", ".join(f"`{name}`" for name in facts.label_names),
        "repo_ref": facts.repo_id or "path/to/this/folder",
        "example_call": '["first text"], ["its pair"]' if facts.pair else '["a text to classify"]',
        "sentence_example": '[["first text", "its pair"]]' if facts.pair else '["a text to classify"]',
        "sentence_transformers": facts.sentence_transformers,
        "torch_activation": "sigmoid()" if facts.multi_label else "softmax(-1)",
        "max_seq_length": facts.max_seq_length,
        "truncation_text": _truncation_text(facts),
        "architecture": facts.architecture or "transformers",
        "dataset_text": f"`{facts.dataset}`",
        "split_text": ", ".join(f"{split} {count}" for split, count in facts.split_counts.items()),
        "dropped_text": _dropped_text(facts.dropped_counts),
        "label_rows": [
            [name, facts.label_counts.get("train", {}).get(name, 0), facts.label_counts.get("test", {}).get(name, 0)]
            for name in facts.label_names
        ],
        "recipe_text": ", ".join(f"{key} {value}" for key, value in facts.recipe.items()) + ".",
        "baseline_header": " blessed baseline |" if baseline else "",
        "baseline_rule": "---:|" if baseline else "",
        "metric_rows": [
            [name, f"{facts.metrics[name]:.4f}"]
            + ([f"{facts.baseline_metrics[name]:.4f}" if name in facts.baseline_metrics else ""] if baseline else [])
            for name in metric_names
        ],
        "slice_metrics": slice_metrics,
        "slice_rows": [
            [name, f"{values.get(EXAMPLE_COUNT, 0):.0f}", *(_figure(values.get(m)) for m in slice_metrics)]
            for name, values in slices.items()
        ],
        "blessing_text": ("Blessed: " if facts.blessed else "Not blessed: ") + facts.blessing_reason + ".",
        "thresholds_text": ", ".join(f"{k} {v}" for k, v in facts.thresholds.items() if v is not None) or "none",
        "tokenization_text": " ".join(f"{split}: {fig.describe()}." for split, fig in facts.tokenization.items())
        or "no tokenization statistics were recorded.",
        "scripts_text": ", ".join(f"{script} {share:.1%}" for script, share in facts.scripts.items()) or "unknown",
    }


def _dropped_text(dropped: dict[str, int]) -> str:
    left_out = {split: n for split, n in dropped.items() if n}
    if not left_out:
        return ""
    return " Rows left out for a missing text or label: " + ", ".join(f"{s} {n}" for s, n in left_out.items()) + "."


def _figure(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"

"""A cheap look at the dataset and the model before anything expensive starts.

Finds what the pipeline's shape depends on (the label set) and fails early, with the fix named, on what
would otherwise fail minutes later inside a component.
"""

from __future__ import annotations

import dataclasses

from components import evaluation
from components.hf_example_gen import sources, spans
from models.pretrained import model_files, read_config, resolve_model_dir
from models.tokenizer import tokenizer_spec
from pipeline.configs import ConfigError, PipelineConfig


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    config: PipelineConfig  # with dataset.label_names filled in, and dataset.span resolved (0 = newest)
    split_sizes: dict[str, int]
    window: tuple[int, ...] = ()  # the spans read, for span-versioned data
    input_fingerprint: str = ""  # of the files read; '' for hub and packaged datasets


def probe_model(config: PipelineConfig) -> None:
    directory = resolve_model_dir(config.model.name, config.model.revision)
    model_files(directory)
    tokenizer_spec(directory)  # WordPiece or a clear error
    limit = read_config(directory).get("max_position_embeddings")
    if limit is not None and config.model.max_seq_length > limit:
        raise ConfigError(
            f"model.max_seq_length {config.model.max_seq_length} is over the model's position limit {limit}; "
            f"use at most {limit}"
        )


def probe(config: PipelineConfig) -> ProbeResult:
    """Runs the model checks, the ExampleGen's own data checks (no Beam, no TFRecords) and builds the
    Evaluator's metrics for the label count found, so no configuration error surfaces after training."""
    probe_model(config)
    read = sources.read_dataset(config.dataset)
    labels = tuple(read.prepared.label_names)
    evaluation.check_eval_config(len(labels), config.evaluation)
    dataset = dataclasses.replace(config.dataset, label_names=labels, span=read.config.span)
    return ProbeResult(
        config=dataclasses.replace(config, dataset=dataset),
        split_sizes={name: len(rows.texts) for name, rows in read.prepared.rows.items()},
        window=read.window,
        input_fingerprint=spans.files_fingerprint(read.config),
    )

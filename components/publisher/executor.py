"""What TFX executes for the HFPublisher: the blessed model's HF export and its card into the `hf_model`
artifact, then, with hub.repo_id set, a push to the Hub."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from absl import logging
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils

from components.publisher.card_facts import SECTIONS, CardSections, configured_facts, gather_facts
from components.publisher.config import HubConfig
from components.publisher.hub_push import HubRevision, push_folder, untagged_run_id
from components.publisher.model_card import build_model_card, parse_card
from models.config_section import build_section
from models.hub.sentence_transformers import MODULES_FILE
from models.serving.hf_export import HF_CONFIG, HF_FORMAT_DIR
from models.tokenizers.tokenizer import character_budget, tokenizer_spec

CARD_FILE = "README.md"
PUBLISHED_PROPERTY = "published"  # 1: the export and card are in the artifact; 0: the model was not blessed
HUB_URL_PROPERTY, HUB_COMMIT_PROPERTY, HUB_TAG_PROPERTY = "hub_url", "hub_commit", "hub_tag"


def section_parameter(name: str) -> str:
    """The publisher's parameter carrying config section `name` (`model` also names its input channel)."""
    return f"{name}_config"


def read_sections(exec_properties: dict[str, Any]) -> CardSections:
    built = {
        name: build_section(cls, json.loads(exec_properties[section_parameter(name)]), name)
        for name, cls in SECTIONS.items()
    }
    return CardSections(exec_properties["pipeline_name"], exec_properties["model_name"], **built)


class Executor(base_executor.BaseExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        published = artifact_utils.get_single_instance(output_dict["hf_model"])
        blessing = artifact_utils.get_single_instance(input_dict["model_blessing"])
        if not blessing.get_int_custom_property("blessed"):
            published.set_int_custom_property(PUBLISHED_PROPERTY, 0)
            print("[HFPublisher] the model is not blessed: no Hugging Face export, nothing pushed", flush=True)
            return
        source = os.path.join(artifact_utils.get_single_uri(input_dict["model"]), HF_FORMAT_DIR)
        io_utils.copy_dir(source, published.uri)
        run_id = (self._context.pipeline_run_id if self._context else "") or _local_copy(published.uri, untagged_run_id)
        sections = read_sections(exec_properties)
        configured = configured_facts(sections)
        configured["text_budget"] = _local_copy(published.uri, lambda folder: _text_budget(folder, configured))
        configured["sentence_transformers"] = fileio.exists(os.path.join(published.uri, MODULES_FILE))
        configured["architecture"] = json.loads(io_utils.read_string_file(os.path.join(published.uri, HF_CONFIG))).get(
            "model_type", ""
        )
        card = build_model_card(gather_facts(input_dict, configured, run_id))
        parse_card(card.content)  # fails here, not at the Hub, on metadata its model-index parser rejects
        io_utils.write_string_file(os.path.join(published.uri, CARD_FILE), card.content)
        published.set_int_custom_property(PUBLISHED_PROPERTY, 1)
        print(f"[HFPublisher] Hugging Face export and model card in {published.uri}", flush=True)
        hub = sections.hub
        if hub.repo_id:
            metrics = card.data.eval_results or []
            summary = ", ".join(f"{r.metric_type} {r.metric_value}" for r in metrics)
            revision = _push(published.uri, hub, run_id, f"{configured['title']}: test {summary}")
            published.set_string_custom_property(HUB_URL_PROPERTY, revision.repo_url)
            published.set_string_custom_property(HUB_COMMIT_PROPERTY, revision.commit)
            published.set_string_custom_property(HUB_TAG_PROPERTY, revision.tag)
            state = "pushed" if revision.pushed else "already there from an earlier attempt of this run"
            print(f"[HFPublisher] {revision.repo_url} @ {revision.tag} ({revision.commit[:12]}): {state}", flush=True)
            logging.info("Hub revision %s", revision)


def _text_budget(folder: str, configured: dict[str, Any]) -> str:
    """The character budget the export's tokenizer cuts texts to, in words (the tokenizer files are the model's)."""
    windows = configured.get("windows")
    spec = tokenizer_spec(folder)
    budget = character_budget(
        spec, configured["max_seq_length"], configured.get("head_share"), windows and tuple(windows)
    )
    return budget.describe()


def _push(uri: str, hub: HubConfig, run_id: str, message: str) -> HubRevision:
    return _local_copy(uri, lambda folder: push_folder(folder, hub, run_id, message))


def _local_copy(uri: str, use):
    """use(a local path holding the folder at uri): huggingface_hub and hashlib read local files."""
    if "://" not in uri:
        return use(uri)
    with tempfile.TemporaryDirectory(prefix="hf-publish-") as local:
        io_utils.copy_dir(uri, local)
        return use(local)

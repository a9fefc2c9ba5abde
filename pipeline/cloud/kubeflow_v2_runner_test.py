"""The compiled Vertex / Kubeflow specs: what each task runs, with which parameters, from which profile."""

import json

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from components.trainer.executor import with_overrides
from components.transform.config import TransformSettings
from models.training.config import TrainingConfig
from pipeline.cloud.compiled_specs import COMPILED_PROFILES, KUBEFLOW_PIPELINE_YAML
from pipeline.cloud.kubeflow_v2_runner import compile_pipeline, compile_spec
from pipeline.config import pipeline_config
from pipeline.config.pipeline_config import ConfigError
from pipeline.orchestration.choose import with_recipe_chosen
from pipeline.orchestration.dag import create_components
from tests.cloud_specs import (
    LOCAL_COMPONENTS,
    PROFILE,
    ROOT,
    custom_config_of,
    executor_of,
    trainer_job,
)


def test_committed_spec_parses_as_a_kfp_pipeline_spec(committed):
    parsed = json_format.ParseDict(committed, pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=False)
    assert parsed.pipeline_info.name == "hf-text-classifier"
    assert parsed.schema_version == "2.1.0"


@pytest.mark.parametrize(("config_path", "template"), sorted(COMPILED_PROFILES.items()))
def test_committed_specs_are_what_the_code_compiles_from_their_profiles(tmp_path, config_path, template):
    fresh = tmp_path / template
    compile_pipeline(pipeline_config.load_config(ROOT / config_path), fresh)
    assert fresh.read_text() == (ROOT / template).read_text(), f"run `bin/in-env hftfx compile --config {config_path}`"


def test_every_local_component_is_in_the_spec_with_its_image(committed, profile):
    tasks = set(committed["root"]["dag"]["tasks"])
    local = {c.id for c in create_components(profile)} - {"latest_blessed_model_resolver"}
    assert local == LOCAL_COMPONENTS
    assert local <= tasks
    assert any(t.startswith("latest_blessed_model_resolver") for t in tasks)
    for task in LOCAL_COMPONENTS:
        assert executor_of(committed, task)["container"]["image"] == profile.cloud.image_uri, task


def test_component_code_is_named_by_module_path(committed):
    text = json.dumps(committed)
    for path in (
        "components.transform.module.preprocessing_fn",
        "components.trainer.module.run_fn",
        "components.evaluator.module",
        "components.trainer.executor.VertexExecutor",
        "components.example_gen.executor.Executor",
        "components.example_validator.executor.Executor",
        "components.pusher.executor.EndpointExecutor",
    ):
        assert path in text, path
    assert "module_file" not in json.dumps(committed["root"]["dag"]["tasks"]["Trainer"]["inputs"]["parameters"])


def test_runtime_parameters_reach_their_components_with_defaults(committed, profile):
    parameters = committed["root"]["inputDefinitions"]["parameters"]
    assert {k: v["defaultValue"] for k, v in parameters.items()} == {
        "span": 0,
        "dataset_revision": "",
        "epochs": str(profile.training.epochs),  # text: a number, or auto (the Trainer chooses from its split)
        # auto: the Trainer chooses it from the model and its own train split (long texts and few examples lower it)
        "learning_rate": "auto",
    }
    assert with_recipe_chosen(profile).training.learning_rate == profile.training.learning_rate == "auto"
    assert with_recipe_chosen(profile).training.warmup_ratio == 0.1, "warm-up and clipping: fixed from the model"
    tasks = committed["root"]["dag"]["tasks"]
    trainer_inputs = tasks["Trainer"]["inputs"]["parameters"]
    assert trainer_inputs["epochs"] == {"componentInputParameter": "epochs"}
    assert trainer_inputs["learning_rate"] == {"componentInputParameter": "learning_rate"}
    example_gen_inputs = tasks["HFDatasetExampleGen"]["inputs"]["parameters"]
    assert example_gen_inputs["span"] == {"componentInputParameter": "span"}
    assert example_gen_inputs["revision"] == {"componentInputParameter": "dataset_revision"}


def test_a_width_auto_would_choose_from_unread_data_is_refused_at_compile(profile, tmp_path):
    """auto is chosen at a local run's preflight from the texts; a compiled spec fixes one width for every run."""
    auto = profile.model_copy(update={"model": profile.model.model_copy(update={"max_seq_length": "auto"})})
    with pytest.raises(ConfigError, match=r"model.max_seq_length: auto is chosen from the texts .* set a number"):
        compile_pipeline(auto, tmp_path / "pipeline.yaml")
    assert not (tmp_path / "pipeline.yaml").exists()


def test_head_tail_reaches_the_compiled_transform(profile, committed):
    model = profile.model.model_copy(update={"long_texts": "head_tail", "head_share": 0.3})
    compiled = custom_config_of(compile_spec(profile.model_copy(update={"model": model})), "Transform")
    assert TransformSettings.from_custom_config(compiled).model.kept_head_share == 0.3
    assert TransformSettings.from_custom_config(custom_config_of(committed, "Transform")).model.kept_head_share is None


def test_windows_reach_the_compiled_transform_and_trainer_with_a_count_the_spec_fixes(profile, committed, tmp_path):
    """The Transform splits texts into the windows the Trainer and the export read; auto's count would be chosen
    from unread data, so it is refused at compile like auto's width."""
    model = profile.model.model_copy(update={"long_texts": "windows", "window_stride": 0.25, "max_windows": 6})
    spec = compile_spec(profile.model_copy(update={"model": model}))
    # One model section, whole, to both: the Transform splits into the windows the Trainer counts.
    transform_model = TransformSettings.from_custom_config(custom_config_of(spec, "Transform")).model
    assert transform_model.windows == (0.25, 6)
    assert custom_config_of(spec, "Trainer")["model"] == transform_model.model_dump(mode="json")
    assert TransformSettings.from_custom_config(custom_config_of(committed, "Transform")).model.windows is None
    auto = profile.model_copy(update={"model": model.model_copy(update={"max_windows": "auto"})})
    with pytest.raises(ConfigError, match=r"model.max_windows: auto is chosen from the texts .* set a number"):
        compile_pipeline(auto, tmp_path / "pipeline.yaml")


def test_kubeflow_spec_runs_no_resolver_and_trains_in_its_own_pod():
    """Kubeflow Pipelines' v2 backend refuses resolver executors; its spec has none and calls no Vertex API."""
    spec = yaml.safe_load((ROOT / KUBEFLOW_PIPELINE_YAML).read_text())
    executors = spec["deploymentSpec"]["executors"]
    assert all("container" in executor for executor in executors.values()), "only container executors"
    assert set(spec["root"]["dag"]["tasks"]) == LOCAL_COMPONENTS
    assert executor_of(spec, "Trainer")["container"]["args"][1] == "components.trainer.executor.Executor"
    assert executor_of(spec, "Pusher")["container"]["args"][1] == "components.pusher.executor.Executor"
    assert "baseline_model" not in spec["root"]["dag"]["tasks"]["Evaluator"].get("inputs", {}).get("artifacts", {})
    assert "aiplatform" not in json.dumps(spec)


def test_a_k_class_sentence_pair_config_compiles_with_its_runtime_parameters():
    """Users' own data on Vertex: 3 labels and a text pair reach the ExampleGen, the Trainer and TFMA."""
    config = pipeline_config.load_config(
        PROFILE,
        {"dataset.label_names": ["contradiction", "neutral", "entailment"], "dataset.text_pair_column": "hypothesis",
         "dataset.text_column": "premise", "dataset.name": "gs://bucket/snli/*.jsonl"},
    )  # fmt: skip
    spec = compile_spec(config)
    parsed = json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=False)
    assert set(parsed.root.input_definitions.parameters) == {"dataset_revision", "epochs", "learning_rate", "span"}
    tasks = spec["root"]["dag"]["tasks"]
    dataset = json.loads(
        tasks["HFDatasetExampleGen"]["inputs"]["parameters"]["dataset_config"]["runtimeValue"]["constant"]
    )
    assert (dataset["name"], dataset["data_files"]) == ("json", ["gs://bucket/snli/*.jsonl"])
    assert dataset["text_pair_column"] == "hypothesis"
    assert trainer_job(spec)["label_names"] == ["contradiction", "neutral", "entailment"]
    assert tasks["Trainer"]["inputs"]["parameters"]["epochs"] == {"componentInputParameter": "epochs"}
    evaluator = json.loads(tasks["Evaluator"]["inputs"]["parameters"]["eval_config"]["runtimeValue"]["constant"])
    macro = [s for s in evaluator["metrics_specs"] if "aggregate" in s]
    assert macro and set(macro[0]["aggregate"]["class_weights"]) == {"0", "1", "2"}
    assert evaluator["model_specs"][0]["prediction_key"] == "probabilities"


def test_the_baseline_query_takes_only_blessings_of_the_runs_task(committed, profile):
    """Vertex compiles TFX's own latest-blessed strategy into ML Metadata filters; ours adds the task key the
    Evaluator writes on each blessing, so a 3-class run never meets a binary baseline there either."""
    from google.cloud.aiplatform_v1.types import PipelineJob

    query = executor_of(committed, "latest_blessed_model_resolver-model-blessing-resolver")["resolver"]
    blessing_filter = query["outputArtifactQueries"]["model_blessing"]["filter"]
    assert blessing_filter.endswith(
        f' AND metadata.task_key.string_value="{profile.dataset.task_contract().key}"'
        ' AND metadata.baseline_scope.string_value="hf-text-classifier"'
    )  # and of this pipeline: Vertex's store holds every pipeline of the project and region
    trainer_config = json.loads(
        committed["root"]["dag"]["tasks"]["Trainer"]["inputs"]["parameters"]["custom_config"]["runtimeValue"][
            "constant"
        ]
    )
    assert trainer_config["baseline_scope"] == "hf-text-classifier"  # recorded on the Model, copied to the blessing
    three_class = profile.model_copy(
        update={"dataset": profile.dataset.model_copy(update={"label_names": ("a", "b", "c")})}
    )
    other = executor_of(compile_spec(three_class), "latest_blessed_model_resolver-model-blessing-resolver")
    assert (
        three_class.dataset.task_contract().key
        in other["resolver"]["outputArtifactQueries"]["model_blessing"]["filter"]
    )
    assert profile.dataset.task_contract().key not in json.dumps(other)
    PipelineJob(pipeline_spec=committed)  # the spec with the filter is still a PipelineJob's pipeline_spec


def test_a_multi_label_config_compiles_a_sigmoid_trainer_and_its_evaluator():
    """Multi-label on Vertex: the ExampleGen, Transform, Trainer and TFMA each get the task and the thresholds."""
    config = pipeline_config.load_config(
        PROFILE,
        {"dataset.label_columns": ["toxic", "insult", "threat"], "dataset.label_names": [],
         "dataset.name": "gs://bucket/comments/*.csv",
         "evaluation.decision_thresholds": {"threat": 0.3}, "training.class_weights": "balanced"},
    )  # fmt: skip
    spec = compile_spec(config)
    json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=False)
    tasks = spec["root"]["dag"]["tasks"]
    dataset = json.loads(
        tasks["HFDatasetExampleGen"]["inputs"]["parameters"]["dataset_config"]["runtimeValue"]["constant"]
    )
    assert dataset["multi_label"] is True and dataset["label_names"] == ["toxic", "insult", "threat"]
    transform = json.loads(tasks["Transform"]["inputs"]["parameters"]["custom_config"]["runtimeValue"]["constant"])
    assert transform["multi_label"] is True
    trainer = trainer_job(spec)
    assert trainer["multi_label"] is True and trainer["decision_thresholds"] == [0.5, 0.5, 0.3]
    evaluator = json.loads(tasks["Evaluator"]["inputs"]["parameters"]["eval_config"]["runtimeValue"]["constant"])
    (class_f1,) = [m for s in evaluator["metrics_specs"] for m in s["metrics"] if m["class_name"] == "ClassF1"]
    assert json.loads(class_f1["config"]) == {"num_classes": 3, "thresholds": [0.5, 0.5, 0.3]}
    assert evaluator["model_specs"][0]["prediction_key"] == "probabilities"
    assert not any(m["class_name"] == "BinaryAccuracy" for s in evaluator["metrics_specs"] for m in s["metrics"])


def test_the_shipped_profiles_have_distinct_pipeline_names():
    """Runs, schedules, labels and baselines on Vertex are found by pipeline name."""
    names = {path: pipeline_config.load_config(ROOT / path).pipeline_name for path in COMPILED_PROFILES}
    assert len(set(names.values())) == len(names), names


def test_scoring_unlabeled_rows_compiles_as_a_batch_scorer_step_reading_cloud_storage(profile):
    """scoring.input in a cloud profile: a BatchScorer task after the Evaluator, in the pipeline image, taking
    the blessed Trainer model; a local path is refused before anything is compiled."""
    scoring = profile.scoring.model_copy(update={"input": "gs://my-hftfx-bucket/unlabeled/*.jsonl"})
    spec = compile_spec(profile.model_copy(update={"scoring": scoring}))
    task = spec["root"]["dag"]["tasks"]["BatchScorer"]
    assert executor_of(spec, "BatchScorer")["container"]["args"][1] == "components.scorer.executor.Executor"
    assert executor_of(spec, "BatchScorer")["container"]["image"] == profile.cloud.image_uri
    inputs = task["inputs"]["artifacts"]
    assert inputs["model"]["taskOutputArtifact"]["producerTask"] == "Trainer"
    assert inputs["model_blessing"]["taskOutputArtifact"]["producerTask"] == "Evaluator"
    assert "gs://my-hftfx-bucket/unlabeled/*.jsonl" in json.dumps(task["inputs"]["parameters"])
    local = profile.scoring.model_copy(update={"input": "data/unlabeled.jsonl"})
    with pytest.raises(
        pipeline_config.ConfigError, match=r"scoring\.input 'data/unlabeled\.jsonl' must be a gs:// path"
    ):
        compile_spec(profile.model_copy(update={"scoring": local}))


def test_filesystem_push_to_gcs_keeps_the_atomic_pusher(profile):
    cloud = profile.cloud.model_copy(update={"push_to": "filesystem"})
    spec = compile_spec(profile.model_copy(update={"cloud": cloud}))
    assert "components.pusher.executor.Executor" in json.dumps(executor_of(spec, "Pusher"))
    assert "gs://my-hftfx-bucket/serving/text_classifier" in json.dumps(spec["root"]["dag"]["tasks"]["Pusher"])


def test_trainer_overrides_fold_into_custom_config():
    properties = {
        "custom_config": json.dumps({"training": {"epochs": 1, "batch_size": 8}}),
        "epochs": "4",  # a runtime parameter's text
        "learning_rate": None,
    }
    folded = json.loads(with_overrides(properties)["custom_config"])
    assert folded["training"] == {"epochs": "4", "batch_size": 8}
    assert TrainingConfig.model_validate(folded["training"]).epochs == 4
    # the learning rate's text too: a rate sent per run, or the compiled default auto that the Trainer chooses
    for sent, trained in (("3e-5", 3e-5), ("auto", "auto")):
        folded = json.loads(with_overrides({**properties, "learning_rate": sent})["custom_config"])
        assert TrainingConfig.model_validate(folded["training"]).learning_rate == trained

"""The compiled Vertex / Kubeflow pipeline, the submission requests and the image recipe, checked offline."""

import json
import re
from pathlib import Path

import pytest
import yaml
from google.auth.credentials import AnonymousCredentials
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from components import run_parameters
from components.hf_trainer import with_overrides
from models.training_config import TrainingConfig
from pipeline import cli, configs
from pipeline.cloud import submit
from pipeline.cloud.compiled_specs import COMPILED_PROFILES, KUBEFLOW_PIPELINE_YAML, PIPELINE_YAML
from pipeline.cloud.kubeflow_v2_runner import compile_pipeline, compile_spec
from pipeline.cloud.profile import dataflow_option_errors, serving_image, validate_cloud
from pipeline.configs import ConfigError
from pipeline.orchestration.dag import create_components
from pipeline.orchestration.probe import with_recipe_chosen
from tests import fake_kfp, fake_vertex
from tests.pipeline_e2e_test import COMPONENTS

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "configs" / "vertex.yaml"
LOCAL_COMPONENTS = COMPONENTS - {"latest_blessed_model_resolver", "BatchScorer"}  # BatchScorer: with scoring.input


@pytest.fixture(scope="module")
def profile():
    return configs.load_config(PROFILE)


@pytest.fixture(scope="module")
def committed():
    return yaml.safe_load((ROOT / PIPELINE_YAML).read_text())


def _executor(spec, task):
    label = spec["components"][spec["root"]["dag"]["tasks"][task]["componentRef"]["name"]]["executorLabel"]
    return spec["deploymentSpec"]["executors"][label]


def _trainer_job(spec):
    return _custom_config(spec, "Trainer")


def _custom_config(spec, task):
    parameters = spec["root"]["dag"]["tasks"][task]["inputs"]["parameters"]
    return json.loads(parameters["custom_config"]["runtimeValue"]["constant"])


def test_committed_spec_parses_as_a_kfp_pipeline_spec(committed):
    parsed = json_format.ParseDict(committed, pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=False)
    assert parsed.pipeline_info.name == "hf-text-classifier"
    assert parsed.schema_version == "2.1.0"


@pytest.mark.parametrize(("config_path", "template"), sorted(COMPILED_PROFILES.items()))
def test_committed_specs_are_what_the_code_compiles_from_their_profiles(tmp_path, config_path, template):
    fresh = tmp_path / template
    compile_pipeline(configs.load_config(ROOT / config_path), fresh)
    assert fresh.read_text() == (ROOT / template).read_text(), f"run `bin/in-env hftfx compile --config {config_path}`"


def test_every_local_component_is_in_the_spec_with_its_image(committed, profile):
    tasks = set(committed["root"]["dag"]["tasks"])
    local = {c.id for c in create_components(profile)} - {"latest_blessed_model_resolver"}
    assert local == LOCAL_COMPONENTS
    assert local <= tasks
    assert any(t.startswith("latest_blessed_model_resolver") for t in tasks)
    for task in LOCAL_COMPONENTS:
        assert _executor(committed, task)["container"]["image"] == profile.cloud.image_uri, task


# What the tpu target sets (Dockerfile): none of it may reach the launcher, a CPU VM without TPU chips.
TPU_IMAGE_VARIABLES = ("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "NEXT_PLUGGABLE_DEVICE_USE_C_API", "TPU_LOAD_LIBRARY")


@pytest.mark.parametrize("accelerator", ["tpu-v5e-4", "l4"])
def test_the_trainer_launcher_runs_the_pipeline_image_and_only_the_worker_pool_the_accelerator_image(
    profile, accelerator
):
    worker_image = f"us-central1-docker.pkg.dev/p/hftfx/pipeline-{accelerator}:0.1.0"
    cloud = profile.cloud.model_copy(update={"trainer_accelerator": accelerator, "trainer_image_uri": worker_image})
    spec = compile_spec(profile.model_copy(update={"cloud": cloud}))
    launcher = _executor(spec, "Trainer")["container"]
    assert launcher["image"] == profile.cloud.image_uri
    assert launcher["args"][1] == "components.hf_trainer.VertexExecutor"  # it creates and polls the CustomJob
    assert not {e.get("name") for e in launcher.get("env", [])} & set(TPU_IMAGE_VARIABLES)
    assert not set(json.dumps(launcher).split('"')) & set(TPU_IMAGE_VARIABLES)
    (pool,) = _custom_job_request(spec).custom_job.job_spec.worker_pool_specs
    assert pool.container_spec.image_uri == worker_image
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert all(variable in dockerfile for variable in TPU_IMAGE_VARIABLES[:2])  # the names above are the real ones


def test_on_kubeflow_the_trainer_pod_trains_so_it_runs_the_trainer_image():
    kubeflow = configs.load_config(ROOT / "configs/kubeflow.yaml")
    image = "us-central1-docker.pkg.dev/p/hftfx/pipeline-gpu:0.1.0"
    spec = compile_spec(
        kubeflow.model_copy(update={"cloud": kubeflow.cloud.model_copy(update={"trainer_image_uri": image})})
    )
    assert _executor(spec, "Trainer")["container"]["image"] == image
    assert _executor(spec, "Transform")["container"]["image"] == kubeflow.cloud.image_uri


def test_component_code_is_named_by_module_path(committed):
    text = json.dumps(committed)
    for path in (
        "components.transform.preprocessing_fn",
        "components.trainer.run_fn",
        "components.evaluation",
        "components.hf_trainer.VertexExecutor",
        "components.hf_example_gen.executor.Executor",
        "components.example_validator.Executor",
        "components.endpoint_pusher.Executor",
    ):
        assert path in text, path
    assert "module_file" not in json.dumps(committed["root"]["dag"]["tasks"]["Trainer"]["inputs"]["parameters"])


def test_runtime_parameters_reach_their_components_with_defaults(committed, profile):
    parameters = committed["root"]["inputDefinitions"]["parameters"]
    assert {k: v["defaultValue"] for k, v in parameters.items()} == {
        "span": 0,
        "dataset_revision": "",
        "epochs": str(profile.training.epochs),  # text: a number, or auto (the Trainer chooses from its split)
        "learning_rate": with_recipe_chosen(profile).training.learning_rate,  # auto: chosen from the model
    }
    assert profile.training.learning_rate == "auto" and parameters["learning_rate"]["defaultValue"] == 1e-4
    tasks = committed["root"]["dag"]["tasks"]
    trainer_inputs = tasks["Trainer"]["inputs"]["parameters"]
    assert trainer_inputs["epochs"] == {"componentInputParameter": "epochs"}
    assert trainer_inputs["learning_rate"] == {"componentInputParameter": "learning_rate"}
    example_gen_inputs = tasks["HFDatasetExampleGen"]["inputs"]["parameters"]
    assert example_gen_inputs["span"] == {"componentInputParameter": "span"}
    assert example_gen_inputs["revision"] == {"componentInputParameter": "dataset_revision"}


def _custom_job_request(spec):
    """The CreateCustomJobRequest TFX's Vertex Trainer would send for the compiled spec: its training args go
    through TFX's own runner steps (pop `project`) and `VertexJobClient.create_training_job`, and the result
    must convert into the API's CustomJob proto (unknown or misplaced fields raise)."""
    import copy

    from google.cloud import aiplatform_v1
    from tfx.extensions.google_cloud_ai_platform import training_clients

    custom_config = _trainer_job(spec)
    job_args = copy.deepcopy(custom_config["ai_platform_training_args"])
    project = job_args.pop("project")
    region = custom_config["ai_platform_vertex_region"]
    # __init__ would build a GAPIC client (credentials); create_training_job needs only the region.
    client = training_clients.VertexJobClient.__new__(training_clients.VertexJobClient)
    client._region = region
    job = client.create_training_job({}, {}, {}, "components.hf_trainer.Executor", job_args, None, None)
    return aiplatform_v1.CreateCustomJobRequest(
        parent=f"projects/{project}/locations/{region}", custom_job=aiplatform_v1.CustomJob(job)
    )


def test_trainer_runs_in_a_vertex_custom_job(committed, profile):
    assert _trainer_job(committed)["ai_platform_enable_vertex"] is True
    request = _custom_job_request(committed)
    assert request.parent == "projects/my-gcp-project/locations/us-central1"
    job = request.custom_job
    (pool,) = job.job_spec.worker_pool_specs
    assert pool.machine_spec.machine_type == "n1-standard-8"  # the profile's placement: cpu
    assert pool.container_spec.image_uri == profile.cloud.image_uri
    command = list(pool.container_spec.command)
    assert command[command.index("--executor_class_path") + 1] == "components.hf_trainer.Executor"
    assert job.job_spec.service_account == profile.cloud.service_account
    assert {k: job.labels[k] for k in profile.cloud.labels} == dict(profile.cloud.labels)
    assert _trainer_job(committed)["training"]["precision"] == "auto"


def test_cmek_and_network_land_where_the_custom_job_api_has_them(profile):
    cloud = profile.cloud.model_copy(
        update={
            "encryption_key": "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k",
            "network": "projects/123/global/networks/vpc",
            "dataflow_subnetwork": "regions/us-central1/subnetworks/hftfx",
        }
    )
    job = _custom_job_request(compile_spec(profile.model_copy(update={"cloud": cloud}))).custom_job
    assert job.encryption_spec.kms_key_name == cloud.encryption_key
    assert job.job_spec.network == cloud.network


@pytest.mark.parametrize(
    ("accelerator", "count", "machine_spec"),
    [
        ("l4", 0, {"machine_type": "g2-standard-8", "accelerator_type": "NVIDIA_L4", "accelerator_count": 1}),
        ("a100", 2, {"machine_type": "a2-highgpu-2g", "accelerator_type": "NVIDIA_TESLA_A100", "accelerator_count": 2}),
        ("l4", 4, {"machine_type": "g2-standard-48", "accelerator_type": "NVIDIA_L4", "accelerator_count": 4}),
        ("t4", 2, {"machine_type": "n1-standard-16", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 2}),
        ("h100", 0, {"machine_type": "a3-highgpu-8g", "accelerator_type": "NVIDIA_H100_80GB", "accelerator_count": 8}),
        ("cpu", 0, {"machine_type": "n1-standard-8"}),
        ("tpu-v5e-8", 0, {"machine_type": "ct5lp-hightpu-8t", "tpu_topology": "2x4"}),
    ],
)
def test_gpu_and_other_placements_give_their_worker_pool(profile, accelerator, count, machine_spec):
    image = "" if accelerator == "cpu" else "us-central1-docker.pkg.dev/p/hftfx/pipeline-accelerated:0.1.0"
    cloud = profile.cloud.model_copy(
        update={"trainer_accelerator": accelerator, "trainer_accelerator_count": count, "trainer_image_uri": image}
    )
    spec = compile_spec(profile.model_copy(update={"cloud": cloud}))
    (pool,) = _custom_job_request(spec).custom_job.job_spec.worker_pool_specs
    as_dict = type(pool.machine_spec).to_dict(
        pool.machine_spec, including_default_value_fields=False, use_integers_for_enums=False
    )
    assert as_dict == machine_spec
    assert pool.container_spec.image_uri == (image or profile.cloud.image_uri)


def test_endpoint_pusher_deploys_on_a_tf_serving_container(committed, profile):
    assert _executor(committed, "Pusher")["container"]["args"][1] == "components.endpoint_pusher.Executor"
    parameters = committed["root"]["dag"]["tasks"]["Pusher"]["inputs"]["parameters"]
    custom_config = json.loads(parameters["custom_config"]["runtimeValue"]["constant"])
    assert custom_config["ai_platform_vertex_container_image_uri"] == profile.cloud.image_uri  # `hftfx serve`
    assert custom_config["ai_platform_serving_args"] == {
        "project_id": "my-gcp-project",
        "endpoint_name": "hf-text-classifier",
        "machine_type": "n1-standard-4",
        "min_replica_count": 1,
        "max_replica_count": 1,
        "traffic_percentage": 100,
        "service_account": "hftfx-serving@my-gcp-project.iam.gserviceaccount.com",
    }


def test_filesystem_push_to_gcs_keeps_the_atomic_pusher(profile):
    cloud = profile.cloud.model_copy(update={"push_to": "filesystem"})
    spec = compile_spec(profile.model_copy(update={"cloud": cloud}))
    assert "components.pusher.Executor" in json.dumps(_executor(spec, "Pusher"))
    assert "gs://my-hftfx-bucket/serving/text_classifier" in json.dumps(spec["root"]["dag"]["tasks"]["Pusher"])


def test_a_width_auto_would_choose_from_unread_data_is_refused_at_compile(profile, tmp_path):
    """auto is chosen at a local run's preflight from the texts; a compiled spec fixes one width for every run."""
    auto = profile.model_copy(update={"model": profile.model.model_copy(update={"max_seq_length": "auto"})})
    with pytest.raises(ConfigError, match=r"model.max_seq_length: auto is chosen from the texts .* set a number"):
        compile_pipeline(auto, tmp_path / "pipeline.yaml")
    assert not (tmp_path / "pipeline.yaml").exists()


def test_head_tail_reaches_the_compiled_transform(profile, committed):
    model = profile.model.model_copy(update={"long_texts": "head_tail", "head_share": 0.3})
    assert _custom_config(compile_spec(profile.model_copy(update={"model": model})), "Transform")["head_share"] == 0.3
    assert "head_share" not in _custom_config(committed, "Transform")  # truncate: the spec as it was


def test_windows_reach_the_compiled_transform_and_trainer_with_a_count_the_spec_fixes(profile, committed, tmp_path):
    """The Transform splits texts into the windows the Trainer and the export read; auto's count would be chosen
    from unread data, so it is refused at compile like auto's width."""
    model = profile.model.model_copy(update={"long_texts": "windows", "window_stride": 0.25, "max_windows": 6})
    spec = compile_spec(profile.model_copy(update={"model": model}))
    assert _custom_config(spec, "Transform")["windows"] == [0.25, 6]
    trainer_model = _custom_config(spec, "Trainer")["model"]
    assert (trainer_model["long_texts"], trainer_model["max_windows"]) == ("windows", 6)
    assert "windows" not in _custom_config(committed, "Transform")
    auto = profile.model_copy(update={"model": model.model_copy(update={"max_windows": "auto"})})
    with pytest.raises(ConfigError, match=r"model.max_windows: auto is chosen from the texts .* set a number"):
        compile_pipeline(auto, tmp_path / "pipeline.yaml")


DATAFLOW_IMAGE = "us-central1-docker.pkg.dev/my-gcp-project/hftfx/pipeline-dataflow:0.1.0"


@pytest.fixture(scope="module")
def on_dataflow(profile):
    """The profile with its data components on Dataflow, as docs/vertex.md's "Data on Dataflow" sets it."""
    cloud = profile.cloud.model_copy(update={"beam_runner": "DataflowRunner", "dataflow_image_uri": DATAFLOW_IMAGE})
    return profile.model_copy(update={"cloud": cloud})


def test_the_default_profile_runs_beam_in_each_component_the_pipeline_image_can_start(committed, profile):
    assert profile.cloud.beam_runner == "DirectRunner"
    assert "--runner=DataflowRunner" not in json.dumps(committed)
    args = _executor(committed, "Transform")["container"]["args"]
    assert "--direct_running_mode=multi_processing" in args


def test_dataflow_args_in_the_compiled_spec_pass_beams_own_validator(on_dataflow):
    """The args the Transform's container gets, validated as DataflowRunner validates them before submitting;
    a value Dataflow would refuse stops compiling, with Beam's message."""
    from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions, SetupOptions, WorkerOptions

    args = _executor(compile_spec(on_dataflow), "Transform")["container"]["args"]
    assert "--runner=DataflowRunner" in args and "--temp_location=gs://my-hftfx-bucket/pipeline-root/beam-tmp" in args
    beam = [a for a in args if a.startswith("--") and "=" in a and not a.startswith("--executor_class_path")]
    assert dataflow_option_errors(beam) == []
    options = PipelineOptions(beam)
    assert options.view_as(WorkerOptions).sdk_container_image == DATAFLOW_IMAGE
    assert options.view_as(SetupOptions).sdk_location == "container"
    assert "use_runner_v2" in options.view_as(DebugOptions).experiments
    bad = on_dataflow.model_copy(update={"cloud": on_dataflow.cloud.model_copy(update={"dataflow_max_workers": 0})})
    with pytest.raises(ConfigError, match=r"Dataflow option: Invalid value \(0\) for option: max_num_workers"):
        validate_cloud(bad)


@pytest.mark.parametrize(
    ("image", "message"),
    [("", "must name the pushed image of the Dockerfile's dataflow target"), (None, "no /opt/apache/beam/boot")],
)
def test_dataflow_without_a_worker_image_is_refused_before_compiling(on_dataflow, image, message):
    image = on_dataflow.cloud.image_uri if image is None else image
    config = on_dataflow.model_copy(
        update={"cloud": on_dataflow.cloud.model_copy(update={"dataflow_image_uri": image})}
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_cloud(config)


def _dockerfile_stages() -> dict[str, list[tuple[str, str]]]:
    """Dockerfile instructions by stage name (continuation lines joined), and the global ARG defaults."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    stages: dict[str, list[tuple[str, str]]] = {"": []}
    current = ""
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, rest = line.strip().partition(" ")
        if instruction.upper() == "FROM":
            current = rest.split()[-1] if " AS " in rest.upper() else rest
            stages[current] = []
        stages[current].append((instruction.upper(), rest.strip()))
    return stages


def test_the_dataflow_target_boots_workers_with_beams_own_program_of_the_locked_version():
    """Dataflow starts a custom container by its entrypoint, Beam's boot program, which must come from the
    Beam SDK image of the same Beam and Python versions as the image's packages."""
    import tomllib

    stages = _dockerfile_stages()
    args = dict(rest.split("=", 1) for instruction, rest in stages[""] if instruction == "ARG" and "=" in rest)
    locked = {p["name"]: p["version"] for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    python = re.search(r"python:(\d+\.\d+)", args["BASE_IMAGE"]).group(1)
    assert args["BEAM_SDK_IMAGE"] == f"docker.io/apache/beam_python{python}_sdk:{locked['apache-beam']}"
    assert ("FROM", "${BEAM_SDK_IMAGE} AS beam-sdk") in stages["beam-sdk"]
    dataflow = stages["dataflow"]
    assert dataflow[0] == ("FROM", "base AS dataflow")  # the project's packages, as every component image
    assert ("COPY", "--from=beam-sdk /opt/apache/beam /opt/apache/beam") in dataflow
    assert ("ENTRYPOINT", '["/opt/apache/beam/boot"]') in dataflow
    assert ("ENV", "RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1") in dataflow  # boot's own venv would not see ours
    assert list(stages)[-1] == "cpu"  # a build without --target still gives the pipeline image


def test_dataflow_workers_join_the_network_through_beams_own_options(on_dataflow):
    """Parsed by Beam's PipelineOptions, as the Dataflow runner reads them."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, WorkerOptions

    cloud = on_dataflow.cloud.model_copy(
        update={
            "network": "projects/123/global/networks/vpc",
            "dataflow_subnetwork": "regions/us-central1/subnetworks/hftfx",
            "encryption_key": "projects/p/locations/l/keyRings/r/cryptoKeys/k",
        }
    )
    config = on_dataflow.model_copy(update={"cloud": cloud})
    spec = compile_spec(config)
    options = PipelineOptions(_executor(spec, "Transform")["container"]["args"])
    assert options.view_as(WorkerOptions).subnetwork == "regions/us-central1/subnetworks/hftfx"
    google = options.view_as(GoogleCloudOptions)
    assert (google.project, google.region, google.dataflow_kms_key) == (
        "my-gcp-project",
        "us-central1",
        cloud.encryption_key,
    )
    assert google.service_account_email == on_dataflow.cloud.service_account


def test_trainer_overrides_fold_into_custom_config():
    properties = {
        "custom_config": json.dumps({"training": {"epochs": 1, "batch_size": 8}}),
        "epochs": "4",  # a runtime parameter's text
        "learning_rate": None,
    }
    folded = json.loads(with_overrides(properties)["custom_config"])
    assert folded["training"] == {"epochs": "4", "batch_size": 8}
    assert TrainingConfig.model_validate(folded["training"]).epochs == 4


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"cloud.project": ""}, "cloud.project"),
        ({"cloud.pipeline_root": "/local/dir"}, "must be a gs://bucket/path"),
        ({"cloud.image_uri": "pipeline"}, "tag or digest"),
        ({"cloud.trainer_accelerator": "k80"}, "'k80' is unknown"),
        ({"cloud.trainer_accelerator": "tpu-v6e-4"}, "TPU v6e with JAX and PyTorch only, not TensorFlow"),
        ({"cloud.trainer_accelerator": "tpu-v5p-8"}, "not among the TPU VMs Vertex AI custom training offers"),
        ({"cloud.trainer_accelerator": "tpu-v3-8"}, "older TPU runtime than the PJRT/libtpu route"),
        (
            {
                "cloud.trainer_accelerator": "tpu-v5e-4",
                "cloud.region": "europe-west1",
                "cloud.trainer_image_uri": "r/t:1",
            },
            "TPU v5e VMs are in us-central1",
        ),
        ({"cloud.network": "projects/my-gcp-project/global/networks/vpc"}, "takes the project number, not its id"),
        ({"model.name": "./my-model"}, "model.name './my-model' is a local folder, which does not exist in the cloud"),
        ({"cloud.labels": {"Team": "ml"}}, "cloud.labels key 'Team' must start with a lowercase letter"),
        ({"cloud.labels": {"team": "ML Platform"}}, "cloud.labels value 'ML Platform' (of 'team')"),
        ({"cloud.trainer_accelerator": "a100", "cloud.trainer_accelerator_count": 3}, "in counts [1, 2, 4, 8, 16]"),
        ({"cloud.trainer_accelerator": "tpu-v5e-4", "cloud.trainer_accelerator_count": 2}, "is for GPUs"),
        (
            {"cloud.trainer_accelerator": "a100", "cloud.trainer_machine_type": "a2-highgpu-4g"},
            "a2-highgpu-4g comes with 4 GPU(s), not 1",
        ),
        ({"cloud.push_to": "endpoint", "cloud.endpoint_name": ""}, "endpoint_name is empty"),
        ({"cloud.push_to": "filesystem", "serving_dir": "serving"}, "must be a gs:// path"),
        ({"cloud.service_account": "me"}, "not a service account email"),
        ({"cloud.service_account": ""}, "the run would go as the project's default Compute Engine identity"),
        ({"cloud.serving_service_account": ""}, "the endpoint's replicas would run as Vertex's service agent"),
        ({"dataset.label_names": []}, "label_names must be declared"),
        ({"training.batch_size": 12, "cloud.trainer_accelerator": "tpu-v5e-4"}, "divisible by 8"),
        ({"cloud.trainer_accelerator": "l4"}, "l4 needs cloud.trainer_image_uri: the pipeline image's TensorFlow"),
        ({"cloud.trainer_accelerator": "tpu-v5e-4"}, "tpu-v5e-4 needs cloud.trainer_image_uri: the pipeline image's"),
        (
            {
                "cloud.network": "projects/1/global/networks/vpc",
                "cloud.beam_runner": "DataflowRunner",
                "cloud.dataflow_image_uri": DATAFLOW_IMAGE,
            },
            "set cloud.dataflow_subnetwork",
        ),
        ({"cloud.dataflow_subnetwork": "hftfx"}, "is not regions/<region>/subnetworks/<name>"),
        (
            {"cloud.orchestrator": "kubeflow"},
            "with orchestrator kubeflow use filesystem",
        ),  # the profile pushes to an endpoint
        (
            {"cloud.orchestrator": "kubeflow", "cloud.push_to": "filesystem", "cloud.trainer_accelerator": "tpu-v5e-4"},
            "'tpu-v5e-4' is a Vertex AI CustomJob placement",
        ),
        ({"cloud.endpoint_keep_previous": -1}, "endpoint_keep_previous must be 0 or more"),
        ({"cloud.experiment": "My Experiment"}, "is not a Vertex AI Experiment name"),
        ({"cloud.experiment": "tuning", "cloud.orchestrator": "kubeflow"}, "with orchestrator kubeflow leave it empty"),
    ],
)
def test_bad_cloud_profiles_are_rejected_before_compiling(overrides, message):
    config = configs.load_config(PROFILE, overrides)
    with pytest.raises(configs.ConfigError, match=re.escape(message)):
        compile_spec(config)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("cloud.beam_runner", "SparkRunner", "cloud.beam_runner = 'SparkRunner': should be 'DirectRunner' or"),
        ("cloud.orchestrator", "airflow", "cloud.orchestrator = 'airflow': should be 'vertex' or 'kubeflow'"),
        ("cloud.push_to", "bucket", "cloud.push_to = 'bucket': should be 'filesystem' or 'endpoint'"),
    ],
)
def test_the_cloud_sections_choices_are_refused_as_the_config_loads(key, value, message):
    with pytest.raises(configs.ConfigError, match=re.escape(message)):
        configs.load_config(PROFILE, {key: value})


@pytest.fixture
def vertex_api(monkeypatch):
    """The fake Vertex API on 127.0.0.1 (and Cloud Storage's bucket lookups); aiplatform's global settings,
    which `aiplatform.init` changes, are put back afterwards."""
    from google.cloud.aiplatform import initializer

    settings = dict(vars(initializer.global_config))
    fake = fake_vertex.FakeVertex()
    with (
        fake_vertex.serve(fake) as address,
        fake_vertex.plaintext_channels(monkeypatch, address),
        fake_vertex.serve_storage(monkeypatch, {"my-hftfx-bucket"}) as fake.storage_paths,
    ):
        yield fake, address
    vars(initializer.global_config).clear()
    vars(initializer.global_config).update(settings)


def compiled(config, tmp_path) -> Path:
    """The spec of `config` (the fake's API host is baked into the spec's Vertex calls)."""
    compile_pipeline(config, tmp_path / PIPELINE_YAML)
    return tmp_path / PIPELINE_YAML


def test_submitted_pipeline_job_arrives_as_the_dry_run_shows_it(profile, vertex_api, tmp_path):
    """`aiplatform.PipelineJob.submit` sends the CreatePipelineJobRequest; the fake parses it off the wire."""
    fake, address = vertex_api
    cloud = profile.cloud.model_copy(
        update={
            "api_endpoint": address,
            "network": "projects/123/global/networks/ml",
            "dataflow_subnetwork": "regions/us-central1/subnetworks/ml",
            "encryption_key": "projects/p/locations/us/keyRings/r/cryptoKeys/k",
        }
    )
    config = profile.model_copy(update={"cloud": cloud})
    values = run_parameters.values(config, {"epochs": 5, "span": 3})
    job = submit.build_pipeline_job(config, compiled(config, tmp_path), values, AnonymousCredentials())
    dry_run = submit.job_request(job, config)
    name = submit.submit_to_vertex(job, config)

    (request,) = fake.requests("PipelineService/CreatePipelineJob")
    assert submit.request_json(request) == dry_run
    assert {path.split("?")[0] for path in fake.storage_paths} == {
        "/storage/v1/b/my-hftfx-bucket"
    }  # exists, not created
    assert name == f"{request.parent}/pipelineJobs/{request.pipeline_job_id}"
    assert request.parent == "projects/my-gcp-project/locations/us-central1"
    assert request.pipeline_job_id.startswith("hf-text-classifier-")
    sent = request.pipeline_job
    assert sent.display_name == "hf-text-classifier"
    assert sent.runtime_config.gcs_output_directory == "gs://my-hftfx-bucket/pipeline-root"
    assert dict(sent.runtime_config.parameter_values) == {
        "span": 3,
        "dataset_revision": "",
        "epochs": "5",
    }  # learning_rate is auto in the config: the compiled default, chosen from the model, applies
    assert dict(sent.labels) == {"team": "ml-platform", "app": "hf-text-classifier"}
    assert sent.service_account == "hftfx-runner@my-gcp-project.iam.gserviceaccount.com"
    assert sent.network == "projects/123/global/networks/ml"
    assert sent.encryption_spec.kms_key_name == cloud.encryption_key
    spec = json_format.ParseDict(
        json_format.MessageToDict(sent._pb.pipeline_spec), pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=False
    )
    assert spec.pipeline_info.name == "hf-text-classifier"
    assert all(task.caching_options.enable_cache for task in spec.root.dag.tasks.values())


def test_a_submitted_run_joins_its_vertex_experiment(profile, vertex_api, tmp_path):
    """cloud.experiment: aiplatform creates the Experiment (a system.Experiment context of the default metadata
    store) when missing and adds the run's system.PipelineRun context to it; a second run reuses it."""
    fake, address = vertex_api
    cloud = profile.cloud.model_copy(update={"api_endpoint": address, "experiment": "hf-text-classifier-tuning"})
    config = profile.model_copy(update={"cloud": cloud})
    names = []
    for epochs in (2, 3):
        values = run_parameters.values(config, {"epochs": epochs})
        job = submit.build_pipeline_job(
            config, compiled(config, tmp_path), values, AnonymousCredentials(), job_id=f"tuning-epochs-{epochs}"
        )
        names.append(submit.submit_to_vertex(job, config))

    store = "projects/my-gcp-project/locations/us-central1/metadataStores/default"
    (created,) = fake.requests("MetadataService/CreateContext")
    assert created.parent == store and created.context_id == "hf-text-classifier-tuning"
    assert created.context.schema_title == "system.Experiment"
    links = fake.requests("MetadataService/AddContextChildren")
    assert [link.context for link in links] == [f"{store}/contexts/hf-text-classifier-tuning"] * 2
    runs = {job.name: job.job_detail.pipeline_run_context.name for job in fake.jobs}
    assert [list(link.child_contexts) for link in links] == [[runs[name]] for name in names]


def test_a_second_submission_of_one_job_id_is_refused_by_the_service(profile, vertex_api, tmp_path):
    from google.api_core.exceptions import AlreadyExists

    fake, address = vertex_api
    config = profile.model_copy(update={"cloud": profile.cloud.model_copy(update={"api_endpoint": address})})
    values = run_parameters.values(config)
    for attempt in range(2):
        job = submit.build_pipeline_job(
            config, compiled(config, tmp_path), values, AnonymousCredentials(), job_id="run-1"
        )
        if attempt == 0:
            submit.submit_to_vertex(job, config)
        else:
            with pytest.raises(AlreadyExists):
                submit.submit_to_vertex(job, config)
    assert len(fake.jobs) == 1


KMS_KEY = "projects/my-gcp-project/locations/us-central1/keyRings/hftfx/cryptoKeys/models"


def _at(profile, address, **cloud):
    """The profile talking to the fake's API host (compiled into the components' Vertex clients)."""
    return profile.model_copy(update={"cloud": profile.cloud.model_copy(update={"api_endpoint": address, **cloud})})


def _pusher_config(spec) -> dict:
    parameters = spec["root"]["dag"]["tasks"]["Pusher"]["inputs"]["parameters"]
    return json.loads(parameters["custom_config"]["runtimeValue"]["constant"])


def _push_to_endpoint(spec, version):
    """What the EndpointPusher executor does with the compiled custom_config once a model is blessed and copied
    to its gs:// push folder: our `configure_aiplatform` (API host, CMEK key), then TFX's
    `runner.deploy_model_for_aip_prediction` (aiplatform Endpoint.list / create, Model.upload, Model.deploy).
    The credentials are the one stand-in (the launcher's come from its VM)."""
    from google.cloud import aiplatform
    from tfx.extensions.google_cloud_ai_platform import runner

    from components.vertex_clients import VERTEX_CLIENT_KEY, configure_aiplatform

    custom_config = _pusher_config(spec)
    aiplatform.init(credentials=AnonymousCredentials(), api_transport="grpc")
    configure_aiplatform(custom_config[VERTEX_CLIENT_KEY])
    return runner.deploy_model_for_aip_prediction(
        serving_path=f"gs://my-hftfx-bucket/pipeline-root/Pusher/pushed_model/{version}",
        model_version_name=f"v{version}",
        ai_platform_serving_args=dict(custom_config["ai_platform_serving_args"]),
        labels={"tfx_executor": "tfx-extensions-google_cloud_ai_platform-pusher-executor-executor"},
        serving_container_image_uri=custom_config["ai_platform_vertex_container_image_uri"],
        endpoint_region=custom_config["ai_platform_vertex_region"],
        enable_vertex=True,
    )


def test_endpoint_push_creates_the_endpoint_uploads_and_deploys_the_model_under_the_cmek_key(profile, vertex_api):
    fake, address = vertex_api
    model_name = _push_to_endpoint(compile_spec(_at(profile, address, encryption_key=KMS_KEY)), 1700000000)

    (created,) = fake.requests("EndpointService/CreateEndpoint")
    assert created.parent == "projects/my-gcp-project/locations/us-central1"
    assert created.endpoint.display_name == "hf-text-classifier"
    assert created.endpoint.encryption_spec.kms_key_name == KMS_KEY
    (uploaded,) = fake.requests("ModelService/UploadModel")
    assert uploaded.model.encryption_spec.kms_key_name == KMS_KEY
    assert uploaded.model.display_name == "v1700000000"
    assert uploaded.model.artifact_uri == "gs://my-hftfx-bucket/pipeline-root/Pusher/pushed_model/1700000000"
    assert uploaded.model.container_spec.image_uri == serving_image(profile.cloud) == profile.cloud.image_uri
    (deployed,) = fake.requests("EndpointService/DeployModel")
    assert deployed.endpoint == fake.endpoints[0].name
    resources = deployed.deployed_model.dedicated_resources
    assert (resources.machine_spec.machine_type, resources.min_replica_count) == ("n1-standard-4", 1)
    assert deployed.deployed_model.model.split("@")[0] == model_name == fake.models[0].name
    assert dict(deployed.traffic_split) == {"0": 100}


@pytest.mark.parametrize("keep", [0, 1])
def test_each_push_retires_the_models_before_it_but_the_kept_ones(profile, vertex_api, keep):
    """TFX alone leaves every earlier model deployed at 0% traffic; the EndpointPusher undeploys them."""
    from components.endpoint_pusher import retire_previous_models

    fake, address = vertex_api
    config = _at(
        profile,
        address,
        endpoint_keep_previous=keep,
        serving_service_account="serving@my-gcp-project.iam.gserviceaccount.com",
    )
    spec = compile_spec(config)
    retired = []
    for version in (1700000000, 1700000100, 1700000200):
        model_name = _push_to_endpoint(spec, version)
        retired += retire_previous_models(_pusher_config(spec), model_name)

    (endpoint,) = fake.endpoints
    newest = fake.models[-1].name
    left = {m.model.split("@")[0] for m in endpoint.deployed_models}
    assert left == {newest, *[m.name for m in fake.models[-1 - keep : -1]]}
    assert endpoint.traffic_split[next(m.id for m in endpoint.deployed_models if m.model.startswith(newest))] == 100
    assert len(fake.requests("EndpointService/UndeployModel")) == len(retired) == 2 - keep
    assert all(
        r.deployed_model.service_account == config.cloud.serving_service_account
        for r in fake.requests("EndpointService/DeployModel")
    )


def test_replicas_and_a_gpu_reach_the_deploy_request(profile, vertex_api):
    fake, address = vertex_api
    config = _at(
        profile, address, endpoint_min_replicas=2, endpoint_max_replicas=6, endpoint_accelerator="l4",
        endpoint_machine_type="g2-standard-8",
    )  # fmt: skip
    _push_to_endpoint(compile_spec(config), 1700000000)

    (deployed,) = fake.requests("EndpointService/DeployModel")
    resources = deployed.deployed_model.dedicated_resources
    assert (resources.min_replica_count, resources.max_replica_count) == (2, 6)
    assert resources.machine_spec.machine_type == "g2-standard-8"
    assert (resources.machine_spec.accelerator_type.name, resources.machine_spec.accelerator_count) == ("NVIDIA_L4", 1)


@pytest.mark.parametrize(
    ("cloud", "message"),
    [
        ({"endpoint_accelerator": "a100"}, "a100 runs on a2-highgpu-* machines, not n1-standard-4"),
        ({"endpoint_accelerator": "tpu-v5e-1"}, "is not one of"),
        ({"endpoint_min_replicas": 3, "endpoint_max_replicas": 2}, "is below endpoint_min_replicas 3"),
        ({"endpoint_traffic_percentage": 0}, "must be 1 to 100"),
    ],
)
def test_endpoint_settings_vertex_would_refuse_are_refused_before_compiling(profile, cloud, message):
    config = profile.model_copy(update={"cloud": profile.cloud.model_copy(update=cloud)})
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_cloud(config)


def test_a_canary_takes_its_share_keeps_the_serving_model_and_promote_gives_it_all(
    profile, vertex_api, monkeypatch, capsys
):
    """A push at 10% leaves the model serving the rest in place; `hftfx promote` moves all the traffic to the
    newest model (UpdateEndpoint) and retires the one before it."""
    from components.endpoint_pusher import retire_previous_models

    fake, address = vertex_api
    stable = compile_spec(_at(profile, address))
    _push_to_endpoint(stable, 1700000000)
    canary = compile_spec(_at(profile, address, endpoint_traffic_percentage=10))
    assert retire_previous_models(_pusher_config(canary), _push_to_endpoint(canary, 1700000100)) == []

    (endpoint,) = fake.endpoints
    first, second = endpoint.deployed_models
    assert dict(endpoint.traffic_split) == {first.id: 90, second.id: 10}

    monkeypatch.setattr(submit, "default_credentials", AnonymousCredentials)
    assert cli.main(["promote", "--config", str(PROFILE), "--set", f"cloud.api_endpoint={address}"]) == 0

    (update,) = fake.requests("EndpointService/UpdateEndpoint")
    assert dict(update.endpoint.traffic_split) == {second.id: 100} and list(update.update_mask.paths) == [
        "traffic_split"
    ]
    assert [m.id for m in endpoint.deployed_models] == [second.id] and dict(endpoint.traffic_split) == {second.id: 100}
    assert f"deployed model {second.id} now takes 100% of the traffic; undeployed {first.id}" in capsys.readouterr().out


def test_the_clean_up_finds_the_endpoint_it_pushed_to_among_endpoints_of_the_same_name(profile, vertex_api):
    """Display names are not unique: another endpoint named alike (created by hand, say) is left alone."""
    from google.cloud import aiplatform_v1

    from components.endpoint_pusher import retire_previous_models

    fake, address = vertex_api
    spec = compile_spec(_at(profile, address))
    retired = []
    for version in (1700000000, 1700000100):
        retired += retire_previous_models(_pusher_config(spec), _push_to_endpoint(spec, version))
        if version == 1700000000:  # a second endpoint of the same display name appears after the first push
            fake.endpoints.append(
                aiplatform_v1.Endpoint(
                    name="projects/my-gcp-project/locations/us-central1/endpoints/999",
                    display_name="hf-text-classifier",
                )
            )
    assert len(retired) == 1
    assert len(fake.endpoints[0].deployed_models) == 1 and not fake.endpoints[1].deployed_models


def test_the_trainer_launcher_creates_and_polls_its_custom_job_at_the_profiles_api_host(
    profile, vertex_api, monkeypatch
):
    """TFX's own launch (`runner.start_cloud_training`: VertexJobClient, create, poll) inside our executor's
    `job_client_at`."""
    import copy

    import google.auth
    from tfx.extensions.google_cloud_ai_platform import runner, training_clients

    from components.vertex_clients import VERTEX_CLIENT_KEY, job_client_at

    fake, address = vertex_api
    trainer = _trainer_job(compile_spec(_at(profile, address, encryption_key=KMS_KEY)))
    assert trainer[VERTEX_CLIENT_KEY]["api_endpoint"] == address
    factory = training_clients.get_job_client
    # The one stand-in: credentials (the launcher's come from its VM; google.auth reads the metadata host at
    # import, so this process cannot be pointed at a fake metadata server: the event function's test does that).
    monkeypatch.setattr(google.auth, "default", lambda **_: (AnonymousCredentials(), "my-gcp-project"))
    with job_client_at(trainer[VERTEX_CLIENT_KEY]):
        runner.start_cloud_training(
            {}, {}, {}, "components.hf_trainer.Executor", copy.deepcopy(trainer["ai_platform_training_args"]),
            None, enable_vertex=True, vertex_region=trainer["ai_platform_vertex_region"],
        )  # fmt: skip
    assert training_clients.get_job_client is factory  # restored
    (created,) = [r for r in fake.received if r.method == "JobService/CreateCustomJob"]
    assert created.request.parent == "projects/my-gcp-project/locations/us-central1"
    assert created.request.custom_job.encryption_spec.kms_key_name == KMS_KEY
    assert fake.requests("JobService/GetCustomJob")[0].name == fake.custom_jobs[0].name


def test_unknown_runtime_parameter_is_refused(profile):
    with pytest.raises(configs.ConfigError, match="unknown pipeline parameter"):
        run_parameters.values(profile, {"epoch": 2})


def test_missing_credentials_say_how_to_log_in(monkeypatch):
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    def no_credentials(**_):
        raise DefaultCredentialsError("none")

    monkeypatch.setattr(google.auth, "default", no_credentials)
    with pytest.raises(submit.CredentialsError, match="gcloud auth application-default login"):
        submit.default_credentials()


@pytest.fixture(scope="module")
def kubeflow_profile():
    return configs.load_config(ROOT / "configs" / "kubeflow.yaml")


def test_kubeflow_spec_runs_no_resolver_and_trains_in_its_own_pod():
    """Kubeflow Pipelines' v2 backend refuses resolver executors; its spec has none and calls no Vertex API."""
    spec = yaml.safe_load((ROOT / KUBEFLOW_PIPELINE_YAML).read_text())
    executors = spec["deploymentSpec"]["executors"]
    assert all("container" in executor for executor in executors.values()), "only container executors"
    assert set(spec["root"]["dag"]["tasks"]) == LOCAL_COMPONENTS
    assert _executor(spec, "Trainer")["container"]["args"][1] == "components.hf_trainer.Executor"
    assert _executor(spec, "Pusher")["container"]["args"][1] == "components.pusher.Executor"
    assert "baseline_model" not in spec["root"]["dag"]["tasks"]["Evaluator"].get("inputs", {}).get("artifacts", {})
    assert "aiplatform" not in json.dumps(spec)


def test_kfp_submission_through_the_kfp_client_carries_root_parameters_and_spec(kubeflow_profile):
    """`hftfx submit --kfp-host` with the real kfp.Client, received by a fake KFP API on 127.0.0.1."""
    fake = fake_kfp.FakeKfp()
    values = run_parameters.values(kubeflow_profile, {"span": 4})
    with fake_kfp.serve(fake) as host:
        run = submit.kfp_run(kubeflow_profile, host, ROOT / KUBEFLOW_PIPELINE_YAML, values)
        result = submit.submit_to_kfp(run)
    assert result.run_id == "run-1"
    (sent,) = fake.runs()
    assert sent["experiment_id"] == fake.experiments["hf-text-classifier-kfp"]
    assert sent["display_name"] == "hf-text-classifier-kfp-span-4"
    assert sent["runtime_config"]["pipeline_root"] == "gs://my-hftfx-bucket/kubeflow-root"
    assert sent["runtime_config"]["parameters"] == {
        "span": 4,
        "dataset_revision": "",
        "epochs": "3",
    }  # learning_rate is auto in the config: the compiled default, chosen from the model, applies
    assert sent["service_account"] == "hftfx-runner"
    spec = json_format.ParseDict(sent["pipeline_spec"], pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=False)
    assert "latest_blessed_model_resolver" not in spec.root.dag.tasks
    assert all(task.caching_options.enable_cache for task in spec.root.dag.tasks.values())


def test_kfp_and_vertex_each_refuse_the_other_ones_profile(profile, kubeflow_profile):
    with pytest.raises(configs.ConfigError, match=re.escape("cloud.orchestrator: kubeflow")):
        submit.kfp_run(profile, "https://kfp.example.com", ROOT / PIPELINE_YAML, run_parameters.values(profile))
    with pytest.raises(configs.ConfigError, match="submit it to Kubeflow Pipelines with --kfp-host"):
        submit.build_pipeline_job(kubeflow_profile, ROOT / KUBEFLOW_PIPELINE_YAML, {}, AnonymousCredentials())
    with pytest.raises(configs.ConfigError, match="http"):
        submit.kfp_run(kubeflow_profile, "kfp.example.com", ROOT / KUBEFLOW_PIPELINE_YAML, {})


def test_image_recipe_installs_the_lock_and_every_module_the_spec_names(committed):
    """A cheap guard on the recipe; tests/image_test.py (`make image`) builds the image and runs it."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    # The lock needs Python >= 3.11: TFX's own image (Python 3.10) cannot be the base.
    assert "FROM ${BASE_IMAGE} AS base" in dockerfile and "python:3.13-slim-trixie" in dockerfile
    assert "uv export --frozen" in dockerfile and "--require-hashes" in dockerfile
    assert "TF_USE_LEGACY_KERAS=1" in dockerfile
    copied = set(re.findall(r"^COPY (\w+)/ ", dockerfile, flags=re.MULTILINE))
    referenced = set(re.findall(r"\b(components|models|pipeline)\.[a-z_.]+", json.dumps(committed)))
    assert referenced and referenced <= copied
    for package in copied:
        assert (ROOT / package / "__init__.py").exists() or package == "configs"


def test_a_k_class_sentence_pair_config_compiles_with_its_runtime_parameters():
    """Users' own data on Vertex: 3 labels and a text pair reach the ExampleGen, the Trainer and TFMA."""
    config = configs.load_config(
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
    assert _trainer_job(spec)["label_names"] == ["contradiction", "neutral", "entailment"]
    assert tasks["Trainer"]["inputs"]["parameters"]["epochs"] == {"componentInputParameter": "epochs"}
    evaluator = json.loads(tasks["Evaluator"]["inputs"]["parameters"]["eval_config"]["runtimeValue"]["constant"])
    macro = [s for s in evaluator["metrics_specs"] if "aggregate" in s]
    assert macro and set(macro[0]["aggregate"]["class_weights"]) == {"0", "1", "2"}
    assert evaluator["model_specs"][0]["prediction_key"] == "probabilities"


def test_the_baseline_query_takes_only_blessings_of_the_runs_task(committed, profile):
    """Vertex compiles TFX's own latest-blessed strategy into ML Metadata filters; ours adds the task key the
    Evaluator writes on each blessing, so a 3-class run never meets a binary baseline there either."""
    from google.cloud.aiplatform_v1.types import PipelineJob

    from pipeline.orchestration.dag import task_of

    query = _executor(committed, "latest_blessed_model_resolver-model-blessing-resolver")["resolver"]
    blessing_filter = query["outputArtifactQueries"]["model_blessing"]["filter"]
    assert blessing_filter.endswith(
        f' AND metadata.task_key.string_value="{task_of(profile).key}"'
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
    other = _executor(compile_spec(three_class), "latest_blessed_model_resolver-model-blessing-resolver")
    assert task_of(three_class).key in other["resolver"]["outputArtifactQueries"]["model_blessing"]["filter"]
    assert task_of(profile).key not in json.dumps(other)
    PipelineJob(pipeline_spec=committed)  # the spec with the filter is still a PipelineJob's pipeline_spec


def test_a_multi_label_config_compiles_a_sigmoid_trainer_and_its_evaluator():
    """Multi-label on Vertex: the ExampleGen, Transform, Trainer and TFMA each get the task and the thresholds."""
    config = configs.load_config(
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
    trainer = _trainer_job(spec)
    assert trainer["multi_label"] is True and trainer["decision_thresholds"] == [0.5, 0.5, 0.3]
    evaluator = json.loads(tasks["Evaluator"]["inputs"]["parameters"]["eval_config"]["runtimeValue"]["constant"])
    (class_f1,) = [m for s in evaluator["metrics_specs"] for m in s["metrics"] if m["class_name"] == "ClassF1"]
    assert json.loads(class_f1["config"]) == {"num_classes": 3, "thresholds": [0.5, 0.5, 0.3]}
    assert evaluator["model_specs"][0]["prediction_key"] == "probabilities"
    assert not any(m["class_name"] == "BinaryAccuracy" for s in evaluator["metrics_specs"] for m in s["metrics"])


def test_a_spec_compiled_from_other_cloud_settings_is_refused_and_a_fresh_compile_is_sent(profile, tmp_path):
    """The committed pipeline.yaml sent with another project, image and service account would start a
    PipelineJob in the new project whose CustomJob and images still named the old one."""
    moved = configs.load_config(
        PROFILE,
        {
            "cloud.project": "other-project",
            "cloud.image_uri": "europe-docker.pkg.dev/other-project/hftfx/pipeline:0.2.0",
            "cloud.service_account": "runner@other-project.iam.gserviceaccount.com",
        },
    )
    values = run_parameters.values(moved)
    with pytest.raises(ConfigError, match="compiled from other settings than this profile") as refused:
        submit.build_pipeline_job(moved, ROOT / PIPELINE_YAML, values, AnonymousCredentials())
    message = str(refused.value)
    for key in ("cloud.project", "cloud.image_uri", "cloud.service_account"):
        assert f"{key} (" in message
    assert '"my-gcp-project" -> "other-project"' in message and "hftfx compile --config" in message
    assert "dataset." not in message and "training." not in message  # only what differs is named
    job = submit.build_pipeline_job(moved, compiled(moved, tmp_path), values, AnonymousCredentials())
    request = submit.create_job_request(job, moved)
    assert request.parent == "projects/other-project/locations/us-central1"
    assert "other-project/hftfx/pipeline:0.2.0" in json.dumps(submit.request_json(request))


def test_the_shipped_profiles_have_distinct_pipeline_names():
    """Runs, schedules, labels and baselines on Vertex are found by pipeline name."""
    names = {path: configs.load_config(ROOT / path).pipeline_name for path in COMPILED_PROFILES}
    assert len(set(names.values())) == len(names), names


def test_the_vertex_docs_list_the_iam_roles_the_code_declares():
    from pipeline.cloud.iam import GRANTS

    page = (ROOT / "docs" / "vertex.md").read_text()
    section = page[page.index("### IAM") :]
    rows = [line.split("|")[1:5] for line in section.splitlines() if line.startswith("| ") and "`roles/" in line]
    assert [(i.strip(), r.strip().strip("`"), s.strip(), w.strip()) for i, r, s, w in rows] == [
        (g.identity, g.role, g.scope, g.why) for g in GRANTS
    ]


def test_doctor_cloud_checks_the_profile_and_its_spec_offline_and_lists_the_roles(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli.main(["doctor", "--cloud", "--config", "configs/vertex.yaml"]) == 0
    out = capsys.readouterr().out
    assert "[OK] profile" in out and "[OK] compiled spec" in out
    assert "roles/aiplatform.user" in out and "roles/dataflow.worker" not in out  # the profile runs no Dataflow
    # actAs on the endpoint's identity, on that identity only: the first push would fail with 403 without it
    assert "roles/iam.serviceAccountUser          on cloud.serving_service_account: deploy the endpoint's" in out
    assert cli.main(["doctor", "--cloud", "--config", "configs/vertex.yaml", "--set", "cloud.region=europe-west4"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] compiled spec" in out and 'cloud.region ("us-central1" -> "europe-west4")' in out


def test_the_gpu_target_installs_cuda_wheels_hash_checked_from_the_lock():
    """TensorFlow's and-cuda extra is the project's gpu extra: locked, and installed with --require-hashes."""
    import tomllib

    stages = _dockerfile_stages()
    (run,) = [rest for instruction, rest in stages["gpu"] if instruction == "RUN"]
    assert "--extra gpu" in run and "--require-hashes" in run and "--frozen" in run
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["gpu"] == ["tensorflow[and-cuda]==2.21.*"]
    locked = {p["name"] for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    assert {"nvidia-cudnn-cu12", "nvidia-cublas-cu12"} <= locked


def test_a_vertex_batch_prediction_job_runs_the_model_the_endpoint_serves(profile, vertex_api):
    """`hftfx predict --on vertex`: aiplatform's BatchPredictionJob request, as the JobService receives it, names
    the model with the endpoint's traffic (the newest push, the earlier one kept at 0%), the JSON lines in and
    the prefix out, the profile's machines, serving identity, CMEK key and labels."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    from pipeline.cloud.vertex_batch import submit_batch_prediction

    fake, address = vertex_api
    config = _at(
        profile,
        address,
        endpoint_keep_previous=1,
        encryption_key=KMS_KEY,
        serving_service_account="serving@my-gcp-project.iam.gserviceaccount.com",
        labels={"team": "reviews"},
    )
    spec = compile_spec(config)
    for version in (1700000000, 1700000100):
        newest = _push_to_endpoint(spec, version)
    job = submit_batch_prediction(
        config, ["gs://my-hftfx-bucket/unlabeled/*.jsonl"], "gs://my-hftfx-bucket/scored/", AnonymousCredentials()
    )

    (request,) = fake.requests("JobService/CreateBatchPredictionJob")
    assert request.parent == "projects/my-gcp-project/locations/us-central1"
    sent = request.batch_prediction_job
    assert sent.model.split("@")[0] == newest == fake.models[-1].name and len(fake.endpoints[0].deployed_models) == 2
    assert sent.input_config.instances_format == "jsonl"
    assert list(sent.input_config.gcs_source.uris) == ["gs://my-hftfx-bucket/unlabeled/*.jsonl"]
    assert sent.output_config.predictions_format == "jsonl"
    assert sent.output_config.gcs_destination.output_uri_prefix == "gs://my-hftfx-bucket/scored/"
    resources = sent.dedicated_resources
    assert (resources.machine_spec.machine_type, resources.starting_replica_count) == ("n1-standard-4", 1)
    assert resources.max_replica_count == 4
    assert sent.service_account == "serving@my-gcp-project.iam.gserviceaccount.com"
    assert sent.encryption_spec.kms_key_name == KMS_KEY
    assert dict(sent.labels) == {"team": "reviews"}
    assert job.resource_name == fake.batch_jobs[0].name
    assert fake.batch_jobs[0].state == aiplatform_v1.JobState.JOB_STATE_PENDING


@pytest.mark.parametrize(
    ("inputs", "output", "message"),
    [
        (["data/local.jsonl"], "gs://my-hftfx-bucket/out/", "JSON lines in Cloud Storage"),
        (["gs://my-hftfx-bucket/in.csv"], "gs://my-hftfx-bucket/out/", "JSON lines in Cloud Storage"),
        (["gs://my-hftfx-bucket/in.jsonl"], "scored/", "a gs:// prefix"),
    ],
)
def test_a_vertex_batch_job_refuses_locations_it_cannot_read_or_write(profile, vertex_api, inputs, output, message):
    from google.auth.credentials import AnonymousCredentials

    from pipeline.cloud.vertex_batch import submit_batch_prediction

    fake, address = vertex_api
    with pytest.raises(configs.ConfigError, match=message):
        submit_batch_prediction(_at(profile, address), inputs, output, AnonymousCredentials())
    assert not fake.received


def test_a_vertex_batch_job_without_a_served_model_says_what_to_do(profile, vertex_api):
    from google.auth.credentials import AnonymousCredentials

    from pipeline.cloud.vertex_batch import submit_batch_prediction

    _, address = vertex_api
    with pytest.raises(configs.ConfigError, match="no model is deployed on an endpoint named 'hf-text-classifier'"):
        submit_batch_prediction(
            _at(profile, address),
            ["gs://my-hftfx-bucket/in.jsonl"],
            "gs://my-hftfx-bucket/out/",
            AnonymousCredentials(),
        )


def test_scoring_unlabeled_rows_compiles_as_a_batch_scorer_step_reading_cloud_storage(profile):
    """scoring.input in a cloud profile: a BatchScorer task after the Evaluator, in the pipeline image, taking
    the blessed Trainer model; a local path is refused before anything is compiled."""
    scoring = profile.scoring.model_copy(update={"input": "gs://my-hftfx-bucket/unlabeled/*.jsonl"})
    spec = compile_spec(profile.model_copy(update={"scoring": scoring}))
    task = spec["root"]["dag"]["tasks"]["BatchScorer"]
    assert _executor(spec, "BatchScorer")["container"]["args"][1] == "components.batch_scorer.Executor"
    assert _executor(spec, "BatchScorer")["container"]["image"] == profile.cloud.image_uri
    inputs = task["inputs"]["artifacts"]
    assert inputs["model"]["taskOutputArtifact"]["producerTask"] == "Trainer"
    assert inputs["model_blessing"]["taskOutputArtifact"]["producerTask"] == "Evaluator"
    assert "gs://my-hftfx-bucket/unlabeled/*.jsonl" in json.dumps(task["inputs"]["parameters"])
    local = profile.scoring.model_copy(update={"input": "data/unlabeled.jsonl"})
    with pytest.raises(configs.ConfigError, match=r"scoring\.input 'data/unlabeled\.jsonl' must be a gs:// path"):
        compile_spec(profile.model_copy(update={"scoring": local}))

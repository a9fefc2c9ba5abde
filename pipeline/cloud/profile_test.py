"""Cloud profiles refused before compiling, and Beam's Dataflow options as Beam itself validates them."""

import json
import re

import pytest
from google.auth.credentials import AnonymousCredentials

from components import run_parameters
from pipeline.cloud import submit
from pipeline.cloud.compiled_specs import KUBEFLOW_PIPELINE_YAML, PIPELINE_YAML
from pipeline.cloud.kubeflow_v2_runner import compile_spec
from pipeline.cloud.profile import dataflow_option_errors, validate_cloud
from pipeline.config import pipeline_config
from pipeline.config.pipeline_config import ConfigError
from tests.cloud_specs import (
    DATAFLOW_IMAGE,
    PROFILE,
    ROOT,
    executor_of,
)


def test_the_default_profile_runs_beam_in_each_component_the_pipeline_image_can_start(committed, profile):
    assert profile.cloud.beam_runner == "DirectRunner"
    assert "--runner=DataflowRunner" not in json.dumps(committed)
    args = executor_of(committed, "Transform")["container"]["args"]
    assert "--direct_running_mode=multi_processing" in args


def test_dataflow_args_in_the_compiled_spec_pass_beams_own_validator(on_dataflow):
    """The args the Transform's container gets, validated as DataflowRunner validates them before submitting;
    a value Dataflow would refuse stops compiling, with Beam's message."""
    from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions, SetupOptions, WorkerOptions

    args = executor_of(compile_spec(on_dataflow), "Transform")["container"]["args"]
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
    options = PipelineOptions(executor_of(spec, "Transform")["container"]["args"])
    assert options.view_as(WorkerOptions).subnetwork == "regions/us-central1/subnetworks/hftfx"
    google = options.view_as(GoogleCloudOptions)
    assert (google.project, google.region, google.dataflow_kms_key) == (
        "my-gcp-project",
        "us-central1",
        cloud.encryption_key,
    )
    assert google.service_account_email == on_dataflow.cloud.service_account


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
        (
            {"cloud.trainer_accelerator": "tpu-v5e-8", "cloud.trainer_workers": 2, "cloud.trainer_image_uri": "r/t:1"},
            "Nearest that works: tpu-v5e-8 (8 chips, one host), or GPU workers",
        ),
        (
            {"cloud.orchestrator": "kubeflow", "cloud.push_to": "filesystem", "cloud.trainer_spot": True},
            "with orchestrator kubeflow the Trainer runs in its pod: set trainer_workers: 1 and trainer_spot: false",
        ),
        ({"cloud.trainer_workers": 2, "training.cpu_replicas": 2}, "with cloud.trainer_workers > 1 set it to 1"),
        (
            {"cloud.trainer_accelerator": "tpu-v5e-8", "cloud.trainer_image_uri": "r/t:1", "training.packing": True},
            "training.packing: true, but on tpu-v5e-8 a TPU compiles one program per shape",
        ),
        ({"cloud.trainer_workers": 2, "training.packing": True}, "2 replicas each take a piece of every batch"),
    ],
)
def test_bad_cloud_profiles_are_rejected_before_compiling(overrides, message):
    config = pipeline_config.load_config(PROFILE, overrides)
    with pytest.raises(pipeline_config.ConfigError, match=re.escape(message)):
        compile_spec(config)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("cloud.beam_runner", "SparkRunner", "cloud.beam_runner = 'SparkRunner': should be 'DirectRunner' or"),
        ("cloud.orchestrator", "airflow", "cloud.orchestrator = 'airflow': should be 'vertex' or 'kubeflow'"),
        ("cloud.push_to", "bucket", "cloud.push_to = 'bucket': should be 'filesystem' or 'endpoint'"),
        ("cloud.trainer_workers", 0, "cloud.trainer_workers = 0: should be at least 1 (machines that train one"),
    ],
)
def test_the_cloud_sections_choices_are_refused_as_the_config_loads(key, value, message):
    with pytest.raises(pipeline_config.ConfigError, match=re.escape(message)):
        pipeline_config.load_config(PROFILE, {key: value})


def test_kfp_and_vertex_each_refuse_the_other_ones_profile(profile, kubeflow_profile):
    with pytest.raises(pipeline_config.ConfigError, match=re.escape("cloud.orchestrator: kubeflow")):
        submit.kfp_run(profile, "https://kfp.example.com", ROOT / PIPELINE_YAML, run_parameters.values(profile))
    with pytest.raises(pipeline_config.ConfigError, match="submit it to Kubeflow Pipelines with --kfp-host"):
        submit.build_pipeline_job(kubeflow_profile, ROOT / KUBEFLOW_PIPELINE_YAML, {}, AnonymousCredentials())
    with pytest.raises(pipeline_config.ConfigError, match="http"):
        submit.kfp_run(kubeflow_profile, "kfp.example.com", ROOT / KUBEFLOW_PIPELINE_YAML, {})

"""Reading compiled specs as Vertex and Kubeflow run them, and the profiles the cloud tests compile: shared by
the tests of pipeline/cloud and the image recipe's."""

import json
import re
from pathlib import Path

from google.auth.credentials import AnonymousCredentials

from pipeline.cloud.compiled_specs import PIPELINE_YAML
from pipeline.cloud.kubeflow_v2_runner import compile_pipeline
from tests.pipeline_nodes import COMPONENTS

ROOT = Path(__file__).resolve().parents[1]  # the repository
PROFILE = ROOT / "configs" / "vertex.yaml"
LOCAL_COMPONENTS = COMPONENTS - {"latest_blessed_model_resolver", "BatchScorer"}  # BatchScorer: with scoring.input


def executor_of(spec, task):
    label = spec["components"][spec["root"]["dag"]["tasks"][task]["componentRef"]["name"]]["executorLabel"]
    return spec["deploymentSpec"]["executors"][label]


def trainer_job(spec):
    return custom_config_of(spec, "Trainer")


def custom_config_of(spec, task):
    parameters = spec["root"]["dag"]["tasks"][task]["inputs"]["parameters"]
    return json.loads(parameters["custom_config"]["runtimeValue"]["constant"])


# What the tpu target sets (Dockerfile): none of it may reach the launcher, a CPU VM without TPU chips.
TPU_IMAGE_VARIABLES = ("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "NEXT_PLUGGABLE_DEVICE_USE_C_API", "TPU_LOAD_LIBRARY")


def custom_job_request(spec):
    """The CreateCustomJobRequest TFX's Vertex Trainer would send for the compiled spec: its training args go
    through TFX's own runner steps (pop `project`) and `VertexJobClient.create_training_job`, and the result
    must convert into the API's CustomJob proto (unknown or misplaced fields raise)."""
    import copy

    from google.cloud import aiplatform_v1
    from tfx.extensions.google_cloud_ai_platform import training_clients

    custom_config = trainer_job(spec)
    job_args = copy.deepcopy(custom_config["ai_platform_training_args"])
    project = job_args.pop("project")
    region = custom_config["ai_platform_vertex_region"]
    # __init__ would build a GAPIC client (credentials); create_training_job needs only the region.
    client = training_clients.VertexJobClient.__new__(training_clients.VertexJobClient)
    client._region = region
    job = client.create_training_job({}, {}, {}, "components.trainer.executor.Executor", job_args, None, None)
    return aiplatform_v1.CreateCustomJobRequest(
        parent=f"projects/{project}/locations/{region}", custom_job=aiplatform_v1.CustomJob(job)
    )


DATAFLOW_IMAGE = "us-central1-docker.pkg.dev/my-gcp-project/hftfx/pipeline-dataflow:0.1.0"


def dockerfile_stages() -> dict[str, list[tuple[str, str]]]:
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


def compiled(config, tmp_path) -> Path:
    """The spec of `config` (the fake's API host is baked into the spec's Vertex calls)."""
    compile_pipeline(config, tmp_path / PIPELINE_YAML)
    return tmp_path / PIPELINE_YAML


KMS_KEY = "projects/my-gcp-project/locations/us-central1/keyRings/hftfx/cryptoKeys/models"


def at_api(profile, address, **cloud):
    """The profile talking to the fake's API host (compiled into the components' Vertex clients)."""
    return profile.model_copy(update={"cloud": profile.cloud.model_copy(update={"api_endpoint": address, **cloud})})


def push_to_endpoint(spec, version):
    """What the EndpointPusher executor does with the compiled custom_config once a model is blessed and copied
    to its gs:// push folder: our `configure_aiplatform` (API host, CMEK key), then TFX's
    `runner.deploy_model_for_aip_prediction` (aiplatform Endpoint.list / create, Model.upload, Model.deploy).
    The credentials are the one stand-in (the launcher's come from its VM)."""
    from google.cloud import aiplatform
    from tfx.extensions.google_cloud_ai_platform import runner

    from components.vertex_clients import VERTEX_CLIENT_KEY, configure_aiplatform

    custom_config = custom_config_of(spec, "Pusher")
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

"""`hftfx doctor`: what environment this is, and whether every piece the pipeline needs is there."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import os
import platform
import time
from collections.abc import Callable

STACK = (
    ("tfx", "tfx.v1"),
    ("tensorflow", "tensorflow"),
    ("tf-keras", "tf_keras"),
    ("tensorflow-transform", "tensorflow_transform"),
    ("tensorflow-data-validation", "tensorflow_data_validation"),
    ("tensorflow-model-analysis", "tensorflow_model_analysis"),
    ("ml-metadata", "ml_metadata"),
    ("tfx-bsl", "tfx_bsl"),
    ("tensorflow-text", "tensorflow_text"),
    ("apache-beam", "apache_beam"),
    ("transformers", "transformers"),
    ("datasets", "datasets"),
    ("kfp", "kfp"),
    ("google-cloud-aiplatform", "google.cloud.aiplatform"),
)


@dataclasses.dataclass
class Check:
    name: str
    ok: bool
    detail: str


def _run(name: str, probe: Callable[[], str]) -> Check:
    started = time.monotonic()
    try:
        detail = probe()
        return Check(name, True, f"{detail} ({time.monotonic() - started:.1f}s)")
    except Exception as error:
        return Check(name, False, f"{type(error).__name__}: {error}")


# Other distributions of the same module: the TPU Trainer's image has TensorFlow as tensorflow-tpu.
ALTERNATIVE_DISTRIBUTIONS = {"tensorflow": ("tensorflow-tpu",)}


def _import(distribution: str, module: str) -> Callable[[], str]:
    def probe() -> str:
        importlib.import_module(module)
        for name in (distribution, *ALTERNATIVE_DISTRIBUTIONS.get(distribution, ())):
            try:
                version = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue
            return version if name == distribution else f"{version} ({name})"
        raise importlib.metadata.PackageNotFoundError(distribution)

    return probe


def _keras_is_legacy() -> str:
    import tensorflow as tf
    import tf_keras

    if os.environ.get("TF_USE_LEGACY_KERAS") != "1":
        raise RuntimeError("TF_USE_LEGACY_KERAS is not 1")
    return f"tf_keras {tf_keras.__version__} with TF {tf.__version__}"


def _encoder_builds() -> str:
    """Our Keras encoder of the packaged model's architecture builds and answers (no transformers model class)."""
    from models.encoders import classifier
    from models.hub.pretrained import packaged_model_dir, read_config

    model = classifier.build(read_config(packaged_model_dir("all-MiniLM-L6-v2")), ["a", "b"])
    return f"{type(model.encoder).__module__.rsplit('.', 1)[-1]} encoder, {model.count_params():,} weights"


def _packaged_model() -> str:
    from models.encoders.from_folder import build_classifier, read_model_folder
    from models.hub.pretrained import packaged_model_dir

    folder = read_model_folder(packaged_model_dir("all-MiniLM-L6-v2"))
    _, report = build_classifier(folder, ["a", "b"])
    return f"{folder.directory}: {report.describe()}"


def _packaged_corpus() -> str:
    from components.example_gen.sources import rotten_tomatoes_reviews

    train = rotten_tomatoes_reviews()
    names = train.features["label"].names
    counts = {names[i]: c for i, c in sorted(__import__("collections").Counter(train["label"]).items())}
    return f"{len(train):,} reviews {counts}"


def _hardware() -> str:
    import tensorflow as tf

    from models.hardware import distribution
    from models.hardware.cpu_features import cpu_supports_bf16

    gpus = tf.config.list_physical_devices("GPU")
    tpu = distribution.tpu_address()
    bf16 = cpu_supports_bf16()
    return f"{os.cpu_count()} CPU cores, {len(gpus)} GPU(s), TPU: {tpu or 'none'}, CPU bf16: {'yes' if bf16 else 'no'}"


def _machine_speed() -> tuple[Callable[[], str], Callable[[], str], Callable[[], str]]:
    """fp32 and bf16 matmul peaks, then the default run's expected time from the fp32 one."""
    from models.hardware.machine_peak import matmul_peak

    measured = {}

    def peak(dtype: str) -> Callable[[], str]:
        def probe() -> str:
            measured[dtype] = matmul_peak(dtype)
            return f"{measured[dtype].gflops:,.0f} GFLOP/s on {measured[dtype].device}"

        return probe

    def expected() -> str:
        from pipeline.machine.estimate import estimate_default_run

        if "float32" not in measured:
            raise RuntimeError("the fp32 peak could not be measured")
        return estimate_default_run(measured["float32"].gflops).describe()

    return peak("float32"), peak("bfloat16"), expected


def environment_lines() -> list[str]:
    libc = " ".join(platform.libc_ver()) or "n/a"
    return [
        f"python      {platform.python_version()} ({platform.python_implementation()}) at {os.sys.executable}",
        f"platform    {platform.platform()}, libc {libc}",
        f"environment {os.environ.get('HFTFX_ENV_DESCRIPTION', 'not started through bin/in-env')}",
        f"hub access  {'offline (HF_HUB_OFFLINE=1)' if os.environ.get('HF_HUB_OFFLINE') == '1' else 'online'}",
    ]


def run_checks() -> list[Check]:
    checks = [_run(f"import {module}", _import(dist, module)) for dist, module in STACK]
    checks.append(_run("Keras 2 (tf_keras)", _keras_is_legacy))
    checks.append(_run("our Keras encoders", _encoder_builds))
    checks.append(_run("hardware", _hardware))
    fp32, bf16, expected = _machine_speed()
    checks.append(_run("fp32 matmul peak", fp32))
    checks.append(_run("bf16 matmul peak", bf16))
    checks.append(_run("packaged MiniLM-L6 model", _packaged_model))
    checks.append(_run("packaged Rotten Tomatoes corpus", _packaged_corpus))
    checks.append(_run("expected time of the default run", expected))
    return checks

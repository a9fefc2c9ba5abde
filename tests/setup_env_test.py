"""The environment's downloads trust the machine's certificate store with no TLS variables set.

On a network that inspects TLS, uv's bundled roots fail ("invalid peer certificate: UnknownIssuer") unless it
reads the system store; this runs the same uv, with the same settings `bin/env.sh` gives `uv sync`, against
the package index with every certificate variable removed. Needs the index (the machines reach PyPI).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TLS_VARIABLES = (
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "UV_NATIVE_TLS",
    "UV_SYSTEM_CERTS", "NIX_SSL_CERT_FILE", "GIT_SSL_CAINFO", "HTTPLIB2_CA_CERTS", "AWS_CA_BUNDLE",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
)  # fmt: skip


def test_uv_resolves_from_the_index_with_no_certificate_variables(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in TLS_VARIABLES}
    script = (
        f'source {ROOT}/bin/env.sh && _ensure_uv && env "${{HFTFX_UV_ENV[@]}}" UV_NO_CACHE=1 "$HFTFX_UV" '
        f"pip install --dry-run --python {sys.executable} --target {tmp_path} six==1.16.0"
    )
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300, check=False)
    if "dns error" in done.stderr or "Could not connect" in done.stderr:
        pytest.skip(f"no route to the package index here: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "six==1.16.0" in done.stderr + done.stdout
    assert "deprecated" not in done.stderr, done.stderr  # uv 0.13 warns on every call given UV_NATIVE_TLS

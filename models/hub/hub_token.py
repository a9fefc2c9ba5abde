"""The Hugging Face Hub token of a cloud run, read from Secret Manager inside each component that reaches the Hub.

A compiled spec names the secret version (`hub.token_secret`) in one environment variable of every container,
the Trainer's CustomJob worker included; the token itself is read at run time with the run's own service
account and lives only in that process's environment, as `$HF_TOKEN`, where huggingface_hub and datasets read
it for private and gated downloads and the HFPublisher for its push. So it never reaches the spec, ML Metadata,
logs, the summary, the report or the card. A local run keeps its own `$HF_TOKEN`.
"""

from __future__ import annotations

import os
import re

from models.errors import UserError

TOKEN_SECRET_ENV = "HFTFX_HUB_TOKEN_SECRET"  # the secret version a cloud container reads the token from
# Secret Manager's host when it is not Google's public one (a Private Service Connect endpoint)
SECRET_MANAGER_ENDPOINT_ENV = "HFTFX_SECRET_MANAGER_ENDPOINT"
HUB_TOKEN_ENV = "HF_TOKEN"  # huggingface_hub's own variable
SECRET_VERSION = re.compile(r"projects/[^/]+/secrets/[A-Za-z0-9_-]+/versions/(\d+|latest)")


class HubTokenError(UserError, RuntimeError):
    """The Hub token's secret cannot be read; the message says what to create or grant."""


def load_hub_token(*names: str) -> None:
    """In a cloud component (TOKEN_SECRET_ENV set): the token read from Secret Manager into $HF_TOKEN and each
    of `names` that is still empty (hub.token_env). Elsewhere nothing: the environment's own token stays."""
    secret = os.environ.get(TOKEN_SECRET_ENV, "")
    targets = [n for n in (HUB_TOKEN_ENV, *names) if not os.environ.get(n)]
    if not secret or not targets:
        return
    token = read_secret(secret)
    for name in targets:
        os.environ[name] = token


def read_secret(version: str) -> str:
    """The secret version's payload, through Secret Manager's client with the process's credentials (a cloud
    job's service account). Missing or denied: the fix named."""
    from google.api_core import exceptions
    from google.cloud import secretmanager

    endpoint = os.environ.get(SECRET_MANAGER_ENDPOINT_ENV)
    client = secretmanager.SecretManagerServiceClient(client_options={"api_endpoint": endpoint} if endpoint else None)
    try:
        response = client.access_secret_version(name=version)
    except exceptions.NotFound:
        raise HubTokenError(
            f"Secret Manager has no {version} (hub.token_secret): add the token as that secret's version "
            "(gcloud secrets versions add SECRET --data-file=-) or name one that exists"
        ) from None
    except exceptions.PermissionDenied:
        raise HubTokenError(
            f"the run's service account may not read {version} (hub.token_secret): grant it "
            "roles/secretmanager.secretAccessor on that secret (gcloud secrets add-iam-policy-binding)"
        ) from None
    return response.payload.data.decode("utf-8").strip()

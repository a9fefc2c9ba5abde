"""The `hub` config section: where a blessed model's Hugging Face export is published."""

from __future__ import annotations

from pydantic import Field, field_validator

from models.config_section import ConfigSection, Texts
from models.hub.hub_token import SECRET_VERSION


class HubConfig(ConfigSection):
    """Where a blessed model's Hugging Face export is published (nothing is pushed while repo_id is empty)."""

    repo_id: str = Field("", description="<user or org>/<name>; created on the first push; empty: nothing is pushed")
    private: bool = Field(True, description="a repo created by the push is private")
    endpoint: str = Field("", description="a self-hosted Hub's URL; empty: huggingface.co (or $HF_ENDPOINT)")
    token_env: str = Field("HF_TOKEN", description="the environment variable holding a write token")
    token_secret: str = Field(
        "",
        description="cloud runs: the Secret Manager secret version holding the Hub token "
        "(projects/<project>/secrets/<name>/versions/<number>), read at run time by each component that reaches "
        "the Hub (private model and dataset downloads, the push) with the run's service account; local runs use "
        "token_env",
    )
    license: str = Field("", description="the model card's license id (apache-2.0, mit, ...); empty leaves it out")
    language: Texts = Field((), description="the model card's ISO 639-1 language codes (en, fr, ...)")

    @field_validator("repo_id")
    @classmethod
    def _a_hub_repo_id(cls, repo_id: str) -> str:
        """A repo id the Hub accepts, with its namespace (checked with the rest of the config)."""
        if not repo_id:
            return repo_id
        from huggingface_hub.utils import HFValidationError, validate_repo_id

        try:
            validate_repo_id(repo_id)
        except HFValidationError as error:
            raise ValueError(f"'{repo_id}' is not a Hub repo id (<user or org>/<name>): {error}") from None
        if "/" not in repo_id:
            raise ValueError(f"'{repo_id}' needs its namespace: <user or org>/{repo_id}")
        return repo_id

    @field_validator("endpoint")
    @classmethod
    def _https_unless_loopback(cls, endpoint: str) -> str:
        """The push sends the write token to the endpoint: in clear over http:// only to this machine."""
        from urllib.parse import urlsplit

        url = urlsplit(endpoint)
        if endpoint and url.scheme != "https" and not (url.scheme == "http" and _loopback(url.hostname or "")):
            raise ValueError(
                f"'{endpoint}' would receive the Hub token unencrypted: use https:// (http:// only for this machine)"
            )
        return endpoint

    @field_validator("token_secret")
    @classmethod
    def _a_secret_version(cls, name: str) -> str:
        if name and not SECRET_VERSION.fullmatch(name):
            raise ValueError(
                f"'{name}' is not a Secret Manager secret version: projects/<project>/secrets/<name>/versions/<number>"
            )
        return name


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

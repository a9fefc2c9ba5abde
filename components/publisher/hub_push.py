"""Publishing a folder to a Hugging Face Hub (huggingface.co or a self-hosted one) through huggingface_hub.

One revision per pipeline run: the push is a commit tagged with the run id (a run without one: the weights'
digest), so a rerun of the same run (a retry, a resumed pipeline) finds its tag and pushes nothing twice. Each
commit mirrors the export: files an older push left that this export lacks are deleted in the same commit, so no
stale weights file sits beside the new ones under the new tag.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
from pathlib import Path

from components.publisher.config import HubConfig
from models.environment import offline_hub
from models.errors import UserError
from models.hub.hub_token import load_hub_token
from models.hub.pretrained import PACKAGED_PREFIX


class HubPushError(UserError, RuntimeError):
    """The push cannot happen; the message says what to set."""


def check_credentials(hub: HubConfig) -> None:
    """A token in the environment that the Hub accepts for writing, and huggingface_hub not switched off: known
    before the run starts, not after training."""
    if not hub.repo_id:
        return
    if not os.environ.get(hub.token_env):
        raise HubPushError(
            f"hub.repo_id is set but ${hub.token_env} is empty: export a write token (huggingface.co/settings/"
            "tokens, or your Hub's), or set hub.token_env to the variable that holds it"
        )
    if offline_hub():
        raise HubPushError("hub.repo_id is set but HF_HUB_OFFLINE=1 switches huggingface_hub off: unset it")
    with _library_endpoint(hub.endpoint):
        check_write_token(hub, os.environ[hub.token_env])
        from huggingface_hub import HfApi

        check_visibility(HfApi(endpoint=hub.endpoint or None, token=os.environ[hub.token_env]), hub)


def check_visibility(api, hub: HubConfig) -> None:
    """hub.private promises a private model: an existing public repo would publish it. Refused, before the run and
    again at the push, rather than the repo's visibility changed behind its owner's back."""
    from huggingface_hub.errors import HfHubHTTPError

    if not hub.private:
        return
    try:
        info = api.model_info(hub.repo_id, revision="main")
    except HfHubHTTPError:  # no such repo (the push creates it private) or no commit yet: nothing public
        return
    if not info.private:
        raise HubPushError(
            f"hub.private is true but {hub.repo_id} exists and is public: the push would publish the model. Make the "
            "repo private on the Hub, or set hub.private false to publish it"
        )


def check_write_token(hub: HubConfig, token: str) -> None:
    """The Hub's own answer on the token (whoami): refused, or read-only, stops the run with the fix. A
    fine-grained token's per-repo scopes are the Hub's to enforce at the push."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, HTTPError  # HTTPError: its HTTP client's, network errors too

    where = hub.endpoint or "the Hub"
    try:
        identity = HfApi(endpoint=hub.endpoint or None).whoami(token=token)
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        if status == 401:
            raise HubPushError(
                f"{where} refuses the token in ${hub.token_env} (401: invalid or revoked): create a write token "
                "(huggingface.co/settings/tokens, or your Hub's) and export it"
            ) from None
        raise HubPushError(f"could not check the token in ${hub.token_env} with {where}: {error}") from None
    except HTTPError as error:
        raise HubPushError(f"could not reach {where} to check the token in ${hub.token_env}: {error}") from None
    role = identity.get("auth", {}).get("accessToken", {}).get("role")
    if role == "read":
        raise HubPushError(
            f"the token in ${hub.token_env} is read-only for {identity.get('name', 'its user')}: hub.repo_id needs "
            "a write token (or a fine-grained one that may write to the repo)"
        )


@dataclasses.dataclass(frozen=True)
class HubRevision:
    repo_url: str
    commit: str
    tag: str
    pushed: bool  # False: the run's tag was already there (a rerun), nothing was sent again


def run_tag(run_id: str) -> str:
    """The run id as a git tag name (no ':', spaces or other characters git refuses)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", run_id).strip("-.") or "run"


def untagged_run_id(folder: str) -> str:
    """A tag for a run without a run id: the digest of its export's files, the same for every retry of the run
    and different for every other model (a fixed name would let the first such run block all later ones)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.name != "README.md"):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return f"model-{digest.hexdigest()[:16]}"


def push_folder(folder: str, hub: HubConfig, run_id: str, commit_message: str) -> HubRevision:
    """Creates the repo if needed, commits `folder` and tags the commit with the run id; idempotent per run."""
    from huggingface_hub import HfApi

    load_hub_token(hub.token_env)  # a cloud component's token, from Secret Manager
    check_credentials(hub)
    with _library_endpoint(hub.endpoint):
        api = HfApi(endpoint=hub.endpoint or None, token=os.environ[hub.token_env])
        return _push(api, folder, hub, run_id, commit_message)


@contextlib.contextmanager
def _library_endpoint(endpoint: str):
    """huggingface_hub parses the commit URL a Hub answers against its module-level ENDPOINT (HF_ENDPOINT at
    import), not the HfApi's own: a self-hosted Hub's URLs are refused unless that names it too."""
    from huggingface_hub import constants

    if not endpoint:
        yield
        return
    saved = constants.ENDPOINT
    constants.ENDPOINT = endpoint.rstrip("/")
    try:
        yield
    finally:
        constants.ENDPOINT = saved


def _push(api, folder: str, hub: HubConfig, run_id: str, commit_message: str) -> HubRevision:
    check_visibility(api, hub)
    repo_url = api.create_repo(hub.repo_id, private=hub.private, exist_ok=True, repo_type="model")
    tag = run_tag(run_id)
    existing = {ref.name: ref.target_commit for ref in api.list_repo_refs(hub.repo_id).tags}
    if tag in existing:
        return HubRevision(str(repo_url), existing[tag], tag, pushed=False)
    # delete_patterns: remote files the folder lacks go in the same commit (huggingface_hub keeps .gitattributes)
    commit = api.upload_folder(
        repo_id=hub.repo_id, folder_path=folder, commit_message=commit_message, delete_patterns="*"
    )
    api.create_tag(hub.repo_id, tag=tag, revision=commit.oid, tag_message=f"pipeline run {run_id}")
    return HubRevision(str(repo_url), commit.oid, tag, pushed=True)


def hub_model_id(name: str) -> str | None:
    """A model or dataset name's Hub id, when it is one (not a local path, a data file or packaged:...)."""
    if name.startswith(PACKAGED_PREFIX) or os.path.exists(name) or "*" in name or name.count("/") > 1:
        return None
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return None
    return name

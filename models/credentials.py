"""Values that look like credentials, so a config holding one is refused before it goes anywhere.

A config value travels far: into the compiled spec (committed, uploaded to Vertex), ML Metadata, the run's
summary and the model card pushed to the Hub. A secret belongs in Secret Manager (hub.token_secret) or the
environment, never in a value. The patterns are the issuers' documented token formats; hand-written because
detect-secrets and its kin are scanners of repositories, not a check of one value.
"""

from __future__ import annotations

import re

_TOKENS = (
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a Google OAuth access token", re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{50,})")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a service account key", re.compile(r'"private_key(?:_id)?"\s*:')),
    ("a password in a URL", re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", re.IGNORECASE)),
    # a URL's query (or fragment: OAuth's implicit flow) carrying what grants access: a GCS / S3 signed URL (V4's
    # X-Goog-/X-Amz- parameters, V2's GoogleAccessId / AWSAccessKeyId with Signature), an Azure SAS, a token
    (
        "a signed URL",
        re.compile(
            r"[?&#](?:X-(?:Goog|Amz)-(?:Signature|Credential)|GoogleAccessId|AWSAccessKeyId|Signature)=", re.I
        ),
    ),
    ("an Azure SAS token", re.compile(r"[?&#]sig=[^&\s]+", re.IGNORECASE)),
    (
        "an access token in a URL",
        re.compile(r"[?&#](?:access_token|id_token|token|api_key|key)=[^&\s]+", re.IGNORECASE),
    ),
)
# Option names whose value is a credential whatever it looks like (builder options, storage options).
_SECRET_NAMES = re.compile(r"(?:^|_)(?:password|passwd|secret|token|api_?key|access_?key|credentials?)$", re.I)


def credential_in(value: str) -> str | None:
    """What kind of credential `value` holds, or None."""
    for kind, pattern in _TOKENS:
        if pattern.search(value):
            return kind
    return None


def is_secret_name(name: str) -> bool:
    """An option named like a credential (token, password, api_key ...)."""
    return bool(_SECRET_NAMES.search(name))

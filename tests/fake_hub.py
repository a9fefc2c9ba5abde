"""A Hugging Face Hub on 127.0.0.1 that answers what huggingface_hub's HfApi sends for a push, and keeps it.

Routes, as huggingface_hub 2.x calls them with Xet off (XET_OFF: the Hub's Xet storage is a Rust client's
chunk protocol, not faked here; with it off huggingface_hub commits through git-LFS, as a Hub without Xet takes):
whoami (tokens in `tokens`, with their role), repo create, README
metadata validation, refs, the file tree, a revision's info and file downloads (snapshot_download; a private repo
only to a known token), preupload (LFS for binary files, as the Hub decides), the git-LFS batch
API and the upload its `href` names, the NDJSON commit (files added and deleted), tag creation. Each repo records
its commits (files by path, as bytes) and its tags, and every request with the token it carried, so a test reads
what arrived exactly as the server received it.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import threading
from urllib.parse import unquote, urlsplit

from tests.fake_vertex import QuietHandler, http_server

XET_OFF = {"HF_HUB_DISABLE_XET": "1"}  # what a process pushing to this fake Hub runs with (see above)
TEXT_SUFFIXES = (".json", ".txt", ".md", ".model")  # what the Hub stores as regular git blobs here


@dataclasses.dataclass
class Commit:
    oid: str
    summary: str
    files: dict[str, bytes]
    deleted: frozenset[str] = frozenset()


@dataclasses.dataclass
class Repo:
    private: bool
    commits: list[Commit] = dataclasses.field(default_factory=list)
    tags: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)  # tag -> (commit oid, message)
    # sizes the Hub reports for files instead of their bytes' own (a file too large to hold in a test)
    declared_sizes: dict[str, int] = dataclasses.field(default_factory=dict)

    def files_at(self, oid: str) -> dict[str, bytes]:
        files = {}
        for commit in self.commits:
            files.update(commit.files)
            for path in commit.deleted:
                files.pop(path, None)
            if commit.oid == oid:
                return files
        raise KeyError(oid)


@dataclasses.dataclass
class FakeHub:
    repos: dict[str, Repo] = dataclasses.field(default_factory=dict)
    lfs_objects: dict[str, bytes] = dataclasses.field(default_factory=dict)
    requests: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # (method, path, token)
    validated_cards: list[str] = dataclasses.field(default_factory=list)
    tokens: dict[str, str] = dataclasses.field(default_factory=dict)  # token -> role (write, read, fineGrained)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


class HubHandler(QuietHandler):
    """The Hub's HTTP API as huggingface_hub calls it, over the FakeHub in `hub` (set per server by _handler)."""

    hub: FakeHub
    port_holder: list[int]

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _json(self, status: int, value) -> None:
        self.reply(status, json.dumps(value).encode())

    def _record(self) -> str:
        path = unquote(urlsplit(self.path).path)
        self.hub.requests.append((self.command, path, self.headers.get("Authorization", "")))
        return path

    def _readable(self, repo: Repo | None) -> bool:
        """A public repo, or a private one asked for with a token the Hub knows (a 404 otherwise, as the Hub
        hides private repos)."""
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        return repo is not None and (not repo.private or token in self.hub.tokens)

    def _resolve(self, path: str) -> tuple[str, bytes, str] | None:
        """/<repo>/resolve/<revision>/<file> -> (file, its bytes, the commit), for a readable repo."""
        repo_id, _, rest = path.lstrip("/").partition("/resolve/")
        revision, _, name = rest.partition("/")
        repo = self.hub.repos.get(repo_id)
        if not self._readable(repo) or not repo.commits:
            return None
        commit = repo.commits[-1].oid if revision == "main" else revision
        files = repo.files_at(commit)
        return (name, files[name], commit) if name in files else None

    def do_HEAD(self):
        path = self._record()
        found = self._resolve(path) if "/resolve/" in path else None
        if found is None:
            return self.reply(404, **{"X-Error-Code": "RepoNotFound"})
        _, data, commit = found
        self.send_response(200)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def do_GET(self):
        path = self._record()
        if "/resolve/" in path:
            found = self._resolve(path)
            if found is None:
                return self._json(404, {"error": "Repository not found"})
            return self.reply(200, found[1], "application/octet-stream")
        if path.startswith("/api/models/") and ("/revision/" in path or path.count("/") == 4):  # a revision, or main
            repo_id, _, revision = path.removeprefix("/api/models/").partition("/revision/")
            revision = revision or "main"
            repo = self.hub.repos.get(repo_id)
            if not self._readable(repo) or not repo.commits:
                return self._json(404, {"error": "Repository not found"})
            commit = repo.commits[-1].oid if revision == "main" else revision
            files = repo.files_at(commit)
            siblings = [{"rfilename": name} for name in sorted(files)]
            if "blobs=true" in urlsplit(self.path).query:  # files_metadata: each file's size (and LFS', not kept)
                for sibling in siblings:
                    sibling["size"] = repo.declared_sizes.get(sibling["rfilename"], len(files[sibling["rfilename"]]))
            return self._json(200, {"id": repo_id, "sha": commit, "private": repo.private, "siblings": siblings})
        if path == "/api/whoami-v2":
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if token not in self.hub.tokens:
                return self._json(401, {"error": "Invalid credentials in Authorization header"})
            access = {"displayName": "pipeline", "role": self.hub.tokens[token]}
            return self._json(200, {"type": "user", "name": "reviews-team", "auth": {"accessToken": access}})
        if path.startswith("/api/models/") and "/tree/" in path:
            repo_id, _ = path.removeprefix("/api/models/").split("/tree/", 1)
            repo = self.hub.repos.get(repo_id)
            if repo is None:
                return self._json(404, {"error": "Repository not found"})
            files = repo.files_at(repo.commits[-1].oid) if repo.commits else {}
            tree = [
                {"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
                for name, data in sorted(files.items())
            ]
            return self._json(200, tree)
        if path.startswith("/api/models/") and path.endswith("/refs"):
            repo = self.hub.repos.get(path.removeprefix("/api/models/").removesuffix("/refs"))
            if repo is None:
                return self._json(404, {"error": "Repository not found"})
            head = repo.commits[-1].oid if repo.commits else ""
            tags = [{"name": t, "ref": f"refs/tags/{t}", "targetCommit": oid} for t, (oid, _) in repo.tags.items()]
            branches = [{"name": "main", "ref": "refs/heads/main", "targetCommit": head}] if head else []
            return self._json(200, {"branches": branches, "tags": tags, "converts": []})
        self._json(404, {"error": f"no route {path}"})

    def do_PUT(self):
        path = self._record()
        if path.startswith("/lfs-upload/"):
            body = self._body()
            oid = path.removeprefix("/lfs-upload/")
            if hashlib.sha256(body).hexdigest() != oid:
                return self._json(400, {"error": "sha256 mismatch"})
            self.hub.lfs_objects[oid] = body
            return self.reply(200)
        self._json(404, {"error": f"no route {path}"})

    def do_POST(self):
        path = self._record()
        body = self._body()
        if path == "/api/repos/create":
            request = json.loads(body)
            namespace = request.get("organization")
            repo_id = f"{namespace}/{request['name']}" if namespace else request["name"]
            url = f"http://127.0.0.1:{self.port_holder[0]}/{repo_id}"
            with self.hub.lock:
                if repo_id in self.hub.repos:  # the Hub names the repo in its 409 too (huggingface_hub parses it)
                    return self._json(409, {"error": "You already created this model repo", "url": url})
                # huggingface_hub 2.x says `visibility`, older releases `private`
                private = request.get("visibility", "private" if request.get("private") else "public") == "private"
                self.hub.repos[repo_id] = Repo(private=private)
            return self._json(200, {"url": url})
        if path == "/api/validate-yaml":
            from huggingface_hub import ModelCard

            content = json.loads(body)["content"]
            try:
                ModelCard(content, ignore_metadata_errors=False)
            except ValueError as error:
                return self._json(400, {"errors": [{"message": str(error)}]})
            self.hub.validated_cards.append(content)
            return self._json(200, {"warnings": []})
        if path.endswith(".git/info/lfs/objects/batch"):
            request = json.loads(body)
            objects = [
                {
                    "oid": o["oid"],
                    "size": o["size"],
                    "actions": {"upload": {"href": f"http://127.0.0.1:{self.port_holder[0]}/lfs-upload/{o['oid']}"}},
                }
                for o in request["objects"]
            ]
            return self._json(200, {"transfer": "basic", "objects": objects})
        if path.startswith("/api/models/"):
            rest = path.removeprefix("/api/models/")
            for route in ("/preupload/", "/commit/", "/tag/"):
                if route in rest:
                    repo_id, revision = rest.split(route, 1)
                    repo = self.hub.repos.get(repo_id)
                    if repo is None:
                        return self._json(404, {"error": "Repository not found"})
                    return getattr(self, route.strip("/"))(repo_id, repo, revision, body)
        self._json(404, {"error": f"no route {path}"})

    def preupload(self, repo_id, repo, revision, body):
        files = json.loads(body)["files"]
        modes = [
            {
                "path": f["path"],
                "uploadMode": "regular" if f["path"].endswith(TEXT_SUFFIXES) else "lfs",
                "shouldIgnore": False,
            }
            for f in files
        ]
        return self._json(200, {"files": modes})

    def commit(self, repo_id, repo, revision, body):
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next(line["value"] for line in lines if line["key"] == "header")
        files, deleted = {}, set()
        for line in lines:
            value = line["value"]
            if line["key"] == "deletedFile":
                deleted.add(value["path"])
            elif line["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif line["key"] == "lfsFile":
                if value["oid"] not in self.hub.lfs_objects:
                    return self._json(400, {"error": f"LFS object {value['oid']} was never uploaded"})
                files[value["path"]] = self.hub.lfs_objects[value["oid"]]
        with self.hub.lock:
            oid = hashlib.sha1(f"{repo_id}:{len(repo.commits)}:{header['summary']}".encode()).hexdigest()
            repo.commits.append(Commit(oid, header["summary"], files, frozenset(deleted)))
        return self._json(
            200, {"commitOid": oid, "commitUrl": f"http://127.0.0.1:{self.port_holder[0]}/{repo_id}/commit/{oid}"}
        )

    def tag(self, repo_id, repo, revision, body):
        request = json.loads(body)
        if request["tag"] in repo.tags:
            return self._json(409, {"error": "Tag already exists"})
        if revision not in {c.oid for c in repo.commits}:
            return self._json(404, {"error": f"Invalid rev id: {revision}"})
        repo.tags[request["tag"]] = (revision, request.get("message", ""))
        return self._json(200, {})


def _handler(hub: FakeHub, port_holder: list[int]) -> type[HubHandler]:
    return type("Handler", (HubHandler,), {"hub": hub, "port_holder": port_holder})


@contextlib.contextmanager
def serve_hub(hub: FakeHub):
    """Serves `hub` on a free port of 127.0.0.1; yields its endpoint URL (what hub.endpoint / HF_ENDPOINT take)."""
    port_holder: list[int] = []
    with http_server(_handler(hub, port_holder)) as port:
        port_holder.append(port)
        yield f"http://127.0.0.1:{port}"

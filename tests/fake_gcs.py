"""Cloud Storage's JSON API for objects on 127.0.0.1, as gcsfs (fsspec's gs://, what datasets reads data files
with) and google-cloud-storage call it: object metadata, listings by prefix and delimiter, media downloads with
byte ranges, multipart uploads with the ifGenerationMatch=0 precondition (412 when the object exists), an object's
own generation and custom metadata (`described`), and reads of one generation (404 for any other). Clients
reach it through STORAGE_EMULATOR_HOST, the storage libraries' own setting. TF's GCS filesystem has no such
setting, so this fake serves the Python clients only."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fake_vertex import QuietHandler, http_server


def _metadata(bucket: str, name: str, data: bytes) -> dict:
    return {
        "kind": "storage#object",
        "bucket": bucket,
        "name": name,
        "size": str(len(data)),
        "generation": "1",
        "metageneration": "1",
        "etag": hashlib.md5(data).hexdigest(),
        "updated": "2026-11-26T07:00:00.000Z",
        "timeCreated": "2026-11-26T07:00:00.000Z",
        "contentType": "application/octet-stream",
    }


def _multipart(content_type: str, body: bytes) -> tuple[dict, bytes]:
    """(metadata, data) of a multipart/related upload body: a JSON part, then the object's bytes."""
    boundary = content_type.split("boundary=", 1)[1].strip('"').encode()
    parts = body.split(b"--" + boundary)[1:-1]  # before the first and after the closing boundary: nothing
    metadata, data = (part.split(b"\r\n\r\n", 1)[1].removesuffix(b"\r\n") for part in parts)
    return json.loads(metadata), data


class StorageHandler(QuietHandler):
    """The Cloud Storage JSON API's object calls google-cloud-storage makes, over `objects` (set per server)."""

    objects: dict[str, bytes]
    described: dict[str, dict]  # "bucket/name" -> fields of its metadata resource (generation, metadata ...)
    asked: list[str]
    writing: threading.Lock  # a precondition check and its write happen as one step, as the service does

    def do_GET(self):
        url = urlsplit(self.path)
        self.asked.append(url.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        download = url.path.startswith("/download/storage/v1/b/")
        rest = url.path.removeprefix("/download/storage/v1/b/" if download else "/storage/v1/b/")
        bucket, _, tail = rest.partition("/")
        if tail == "o":
            return self._list(bucket, query.get("prefix", ""), query.get("delimiter", ""))
        name = unquote(tail.removeprefix("o/"))
        data = self.objects.get(f"{bucket}/{name}")
        own = self.described.get(f"{bucket}/{name}", {})
        resource = None if data is None else {**_metadata(bucket, name, data), **own}
        if resource is None or query.get("generation", resource["generation"]) != resource["generation"]:
            return self.reply(404, json.dumps({"error": {"code": 404, "message": "No such object"}}).encode())
        if not download:
            return self.reply(200, json.dumps(resource).encode())
        span = self.headers.get("Range", "")
        if span.startswith("bytes="):
            start, _, end = span.removeprefix("bytes=").partition("-")
            part = data[int(start) : int(end) + 1 if end else None]
            return self.reply(206, part, "application/octet-stream")
        return self.reply(200, data, "application/octet-stream")

    def do_POST(self):
        url = urlsplit(self.path)
        self.asked.append(url.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        bucket = url.path.removeprefix("/upload/storage/v1/b/").partition("/")[0]
        if query.get("uploadType") != "multipart":
            return self.reply(501, b'{"error": {"code": 501, "message": "only multipart uploads here"}}')
        metadata, data = _multipart(self.headers["Content-Type"], self.rfile.read(int(self.headers["Content-Length"])))
        key = f"{bucket}/{metadata['name']}"
        with self.writing:
            if query.get("ifGenerationMatch") == "0" and key in self.objects:
                error = {
                    "error": {
                        "code": 412,
                        "message": "At least one of the pre-conditions you specified did not hold.",
                    }
                }
                return self.reply(412, json.dumps(error).encode())
            self.objects[key] = data
        self.reply(200, json.dumps(_metadata(bucket, metadata["name"], data)).encode())

    def _list(self, bucket: str, prefix: str, delimiter: str):
        items, prefixes = [], set()
        with self.writing:
            stored = sorted(self.objects.items())
        for key, data in stored:
            owner, _, name = key.partition("/")
            if owner != bucket or not name.startswith(prefix):
                continue
            below = name[len(prefix) :]
            if delimiter and delimiter in below:
                prefixes.add(prefix + below.split(delimiter)[0] + delimiter)
            else:
                items.append(_metadata(bucket, name, data))
        body = {"kind": "storage#objects", "items": items, "prefixes": sorted(prefixes)}
        self.reply(200, json.dumps(body).encode())


@contextlib.contextmanager
def serve_objects(monkeypatch, objects: dict[str, bytes], described: dict[str, dict] | None = None):
    """Serves `objects` ("bucket/path/to/object" -> bytes, uploads added to it), with `described`'s metadata fields
    over the defaults; yields the request paths it received."""
    asked: list[str] = []
    described = {} if described is None else described  # kept: the caller may add to it while it is served
    fields = {"objects": objects, "described": described, "asked": asked, "writing": threading.Lock()}
    handler = type("Handler", (StorageHandler,), fields)
    with http_server(handler) as port:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
        yield asked

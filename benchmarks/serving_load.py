"""`hftfx serve` under load: 1, 8 and 32 clients sending one-text requests for a fixed time, against the same
server making one model call per request (`--max-batch 1`, the former design), and at 32 clients against itself
logging every row (`--log-dir`), all started in this run as Vertex starts the container (its variables, a fresh
process). Requests/s, p50 and p99 latency, errors."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np

from tests.vertex_container import serving

CLIENTS = (1, 8, 32)


@contextlib.contextmanager
def started(model_dir: str, *flags: str):
    with serving([sys.executable, "-m", "pipeline.cli", "serve", *flags], model_dir) as container:
        yield container.predict


def load(url: str, clients: int, seconds: float, texts: list[str]) -> dict:
    """Each client sends one text per request, back to back, for `seconds`: requests/s, p50 / p99 ms, errors."""
    stop = time.monotonic() + seconds
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()

    def client(index: int) -> None:
        nonlocal errors
        sent = 0
        while time.monotonic() < stop:
            body = json.dumps({"instances": [texts[(index * 997 + sent) % len(texts)]]}).encode()
            request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
            started_at = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    response.read()
                ok = response.status == 200
            except (urllib.error.URLError, OSError):
                ok = False
            with lock:
                if ok:
                    latencies.append((time.perf_counter() - started_at) * 1e3)
                else:
                    errors += 1
            sent += 1

    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    elapsed = time.monotonic() - began
    return {
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(latencies) if latencies else float("nan"),
        "p99": float(np.percentile(latencies, 99)) if latencies else float("nan"),
        "errors": errors,
    }


LOGGED_CLIENTS = 32  # the prediction log's cost is measured where the server is busiest


def measure(model_dir: str, texts: list[str], seconds: float) -> dict[str, dict[int, dict]]:
    """{"batched" | "one call per request" | "logging every row": {clients: figures}}, the servers one after
    the other (the logging one at LOGGED_CLIENTS only)."""
    results: dict[str, dict[int, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="hftfx-bench-log-") as logs:
        servers = (
            ("batched", (), CLIENTS),
            ("one call per request", ("--max-batch", "1"), CLIENTS),
            ("logging every row", ("--log-dir", logs), (LOGGED_CLIENTS,)),
        )
        for name, flags, client_counts in servers:
            with started(model_dir, *flags) as url:
                load(url, 4, 2.0, texts)  # warm every path up
                results[name] = {clients: load(url, clients, seconds, texts) for clients in client_counts}
    return results


def describe(figures: dict) -> str:
    rps, p50, p99, errors = (figures[k] for k in ("rps", "p50", "p99", "errors"))
    return f"{rps:.0f} req/s, p50 {p50:.0f} / p99 {p99:.0f} ms, {errors} errors"


def rows(model_dir: str, texts: list[str], seconds: float = 10.0):
    """(name, value, baseline, ratio) per client count."""
    results = measure(model_dir, texts, seconds)
    batched, single, logged = results["batched"], results["one call per request"], results["logging every row"]
    return [
        *(
            (
                f"serving load, {clients} client(s), one text per request: hftfx serve vs one model call per request",
                describe(batched[clients]),
                describe(single[clients]),
                f"{batched[clients]['rps'] / single[clients]['rps']:.2f}x",
            )
            for clients in CLIENTS
        ),
        (
            f"serving load, {LOGGED_CLIENTS} clients: logging every row (--log-dir) vs not logging",
            describe(logged[LOGGED_CLIENTS]),
            describe(batched[LOGGED_CLIENTS]),
            f"{logged[LOGGED_CLIENTS]['rps'] / batched[LOGGED_CLIENTS]['rps']:.2f}x",
        ),
    ]

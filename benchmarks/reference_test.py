from benchmarks import reference
from benchmarks.sections import with_preamble


def test_benchmarks_md_is_rendered_from_reference_json():
    """`make bench` writes its figures once, as data; BENCHMARKS.md's part is rendered from them."""
    written = reference.BENCHMARKS_MD.read_text(encoding="utf-8")
    rendered = with_preamble(written, reference.render_bench(reference.read()["bench"]))
    assert written == rendered, "render it again: bin/in-env python -m benchmarks.reference"


def test_the_default_runs_headline_is_among_the_bench_figures():
    recorded = reference.read()
    assert {"accuracy", "auc", "wall_seconds", "matmul_peak_gflops"} <= set(recorded["default_run"])
    assert any(row["name"].startswith("whole run: wall seconds") for row in recorded["bench"]["rows"])

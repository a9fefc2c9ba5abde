from benchmarks import reference


def test_benchmarks_md_is_rendered_from_reference_json():
    """The bench targets write their figures once, as data; BENCHMARKS.md is rendered from them."""
    written = reference.BENCHMARKS_MD.read_text(encoding="utf-8")
    assert written == reference.render(reference.read()), "render it again: bin/in-env python -m benchmarks.reference"


def test_a_section_replaces_its_namesake_in_place_and_a_new_one_is_appended(tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "REFERENCE", tmp_path / "reference.json")
    bench = {"machine": "m", "seconds": 1, "rows": [{"name": "x", "value": "9", "baseline": "-", "ratio": "-"}]}
    reference.write({"bench": bench, "sections": []})
    out = tmp_path / "BENCHMARKS.md"
    for heading, value in (("## A", "1"), ("## B", "2"), ("## A", "3")):
        reference.record_section(reference.table_section(heading, ["about"], ["v"], ["---:"], [[value]]), out)
    text = out.read_text()
    assert text.index("## A") < text.index("## B") and "| 3 |" in text and "| 1 |" not in text
    assert text.startswith("# Benchmarks\n\nWritten by `make bench` on m in 1 s.")

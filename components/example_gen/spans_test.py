"""Span discovery and selection on real folders: newest span, windows, ready markers, fingerprints."""

import os

import pytest

from components.example_gen import input_paths, sources, spans
from components.example_gen.config import DatasetConfig


def write_span(root, span, name="part-0.csv", text="text,label\nfine,pos\nbad,neg\n", digits="{}"):
    folder = root / f"span-{digits.format(span)}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder


def spanned(root, **kwargs):
    return DatasetConfig(name="csv", data_files=(f"{root}/span-{{SPAN}}/*.csv",), **kwargs)


def test_newest_span_is_read_by_default_and_a_window_reads_the_ones_before(tmp_path):
    for span in (1, 2, 10):
        write_span(tmp_path, span)
    assert list(spans.available_spans(spanned(tmp_path))) == [1, 2, 10]

    newest = spans.select(spanned(tmp_path))
    assert (newest.span, newest.window) == (10, (10,))
    assert newest.config.data_files == (f"{tmp_path}/span-10/part-0.csv",)

    window = spans.select(spanned(tmp_path, span=10, span_window=2))
    assert window.window == (2, 10)
    assert window.config.data_files == (f"{tmp_path}/span-2/part-0.csv", f"{tmp_path}/span-10/part-0.csv")

    older = spans.select(spanned(tmp_path, span=2, span_window=5))
    assert (older.span, older.window) == (2, (1, 2))


def test_zero_padded_span_folders_keep_their_own_names(tmp_path):
    write_span(tmp_path, 7, digits="{:04d}")
    selection = spans.select(spanned(tmp_path, span_digits=4))
    assert selection.span == 7
    assert selection.config.data_files == (f"{tmp_path}/span-0007/part-0.csv",)


def test_a_span_has_one_name(tmp_path):
    """span-03 beside span-3, or an Arabic-Indic three: other names of span 3, ignored with the reason."""
    for name in ("3", "03", "\u0663", "0010"):
        write_span(tmp_path, 0, digits=name)
    assert list(spans.available_spans(spanned(tmp_path))) == [3]
    assert spans.select(spanned(tmp_path)).config.data_files == (f"{tmp_path}/span-3/part-0.csv",)
    assert spans.span_problem("03") == (
        "span name '03' is not how this dataset names span 3 ('3': dataset.span_digits 0, without leading zeros)"
    )
    assert "other than ASCII 0-9" in spans.span_problem("\u0663")
    assert spans.span_problem("0003", 4) is None and "('0003'" in spans.span_problem("3", 4)
    assert spans.span_problem("12345", 4) is None  # past the padding, the number itself


def test_a_span_without_its_ready_marker_does_not_count(tmp_path):
    write_span(tmp_path, 1)
    (write_span(tmp_path, 1) / "_SUCCESS").write_text("")
    write_span(tmp_path, 2)  # still uploading
    config = spanned(tmp_path, ready_marker="_SUCCESS")
    assert list(spans.available_spans(config)) == [1]
    assert spans.select(config).span == 1


def test_split_files_mix_spanned_training_data_with_a_fixed_test_set(tmp_path):
    write_span(tmp_path, 3)
    golden = tmp_path / "golden.csv"
    golden.write_text("text,label\nok,pos\n")
    config = DatasetConfig(
        name="csv", split_files={"train": (f"{tmp_path}/span-{{SPAN}}/*.csv",), "test": (str(golden),)}
    )
    selection = spans.select(config)
    assert selection.config.split_files == {"train": (f"{tmp_path}/span-3/part-0.csv",), "test": (str(golden),)}


def test_missing_spans_are_named(tmp_path):
    with pytest.raises(spans.SpanError, match=r"no span found for .*span-\{SPAN\}.*span-1/"):
        spans.select(spanned(tmp_path))
    write_span(tmp_path, 1)
    with pytest.raises(spans.SpanError, match=r"span 4 has no data .* available spans: \[1\]"):
        spans.select(spanned(tmp_path, span=4))


def test_span_of_path_maps_event_objects_to_spans():
    config = DatasetConfig(name="csv", data_files=("gs://bkt/data/span-{SPAN}/*.csv",))
    assert spans.span_of_path(config, "gs://bkt/data/span-12/part-3.csv") == "12"
    assert spans.span_of_path(config, "gs://bkt/data/span-12/notes.txt") is None
    assert spans.span_of_path(config, "gs://bkt/other/span-12/part-3.csv") is None
    marked = DatasetConfig(name="csv", data_files=("gs://bkt/data/span-{SPAN}/*.csv",), ready_marker="_SUCCESS")
    assert spans.span_of_path(marked, "gs://bkt/data/span-12/part-3.csv") is None
    assert spans.span_of_path(marked, "gs://bkt/data/span-12/_SUCCESS") == "12"


def test_fingerprint_changes_when_a_file_is_replaced_in_place(tmp_path):
    folder = write_span(tmp_path, 1)
    config = spans.select(spanned(tmp_path)).config

    def fingerprint():
        return sources.files_fingerprint(sources.resolve_files(config))

    before = fingerprint()
    assert before == fingerprint()
    (folder / "part-0.csv").write_text("text,label\nfine,pos\nbad,neg\nmore,pos\n")
    os.utime(folder / "part-0.csv", ns=(1, 1))
    assert fingerprint() != before
    assert sources.files_fingerprint({}) == ""


def test_a_local_files_fingerprint_reads_its_time_as_tfxs_filesystems_did(tmp_path):
    """Fingerprints recorded by earlier runs (TFX's fileio: whole seconds in nanoseconds) stay comparable."""
    from tfx.dsl.io import fileio

    path = tmp_path / "part-0.csv"
    path.write_text("text,label\nfine,pos\n")
    os.utime(path, ns=(1_795_000_000_123_456_789, 1_795_000_000_123_456_789))
    stat = fileio.stat(str(path))
    assert input_paths.size_and_mtime(str(path)) == (stat.length, stat.mtime_nsec)
    assert input_paths.rfc3339_nanos("2026-11-26T13:00:00.123Z") == 1_795_698_000_123_000_000
    assert input_paths.rfc3339_nanos("2026-11-26T13:00:00Z") == 1_795_698_000_000_000_000

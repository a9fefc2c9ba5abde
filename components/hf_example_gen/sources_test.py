"""Data files in Cloud Storage: datasets opens gs:// through fsspec, whose Cloud Storage filesystem (gcsfs) is
a declared dependency; read here from a fake of Cloud Storage's JSON API, as a cloud ExampleGen reads them."""

from components.hf_example_gen import sources
from components.hf_example_gen.config import DatasetConfig
from tests.fake_gcs import serve_objects
from tests.fake_vertex import serve_metadata_server


def test_gs_data_files_are_read_through_fsspec(monkeypatch):
    reviews = "review,sentiment\n" + "".join(f"review number {i},{'pos' if i % 2 else 'neg'}\n" for i in range(40))
    objects = {"reviews-bucket/data/part-0.csv": reviews.encode(), "reviews-bucket/data/notes.txt": b"not data"}
    config = DatasetConfig(
        name="csv", data_files=("gs://reviews-bucket/data/*.csv",), text_column="review", label_column="sentiment"
    )
    with (
        serve_objects(monkeypatch, objects) as asked,
        serve_metadata_server("p", "runner@p.iam.gserviceaccount.com") as md,
    ):
        monkeypatch.setenv("GCE_METADATA_HOST", md)  # the container's identity, as on Vertex
        monkeypatch.setenv("GCE_METADATA_IP", md)
        read = sources.open_dataset(config)
        sample = sources.sample(read, 1000, 30.0)

    rows = [record for _, _, record in sample.rows()]
    assert sample.complete and len(rows) == 40
    assert {r["sentiment"] for r in rows} == {"pos", "neg"} and rows[0]["review"] == "review number 0"
    assert any(path.startswith("/download/storage/v1/b/reviews-bucket/o/") for path in asked)

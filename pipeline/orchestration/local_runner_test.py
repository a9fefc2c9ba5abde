"""The progress lines a local run prints come from TFX's own log records: pinned against a real LocalDagRunner, so a
TFX release that rewords them fails here rather than leaving a run silent."""

import io

from tfx.dsl.component.experimental.decorators import component
from tfx.orchestration import metadata
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.orchestration.local.local_dag_runner import LocalDagRunner

from pipeline.orchestration.local_runner import progress_reporting


@component
def Greeting() -> None:  # a component is named as a class
    """The smallest component: its run is what the progress lines time."""


def test_each_component_gets_a_started_line_and_a_timed_done_line(tmp_path):
    stream = io.StringIO()
    with progress_reporting(stream, verbose=False):
        LocalDagRunner().run(
            tfx_pipeline.Pipeline(
                pipeline_name="progress-test",
                pipeline_root=str(tmp_path / "root"),
                components=[Greeting()],
                metadata_connection_config=metadata.sqlite_metadata_connection_config(str(tmp_path / "m.sqlite")),
            )
        )
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[pipeline] Greeting ..."
    assert lines[1].startswith("[pipeline] Greeting done in ") and lines[1].endswith("s"), lines
    assert len(lines) == 2, "TFX's and Beam's INFO chatter stays out without --verbose"

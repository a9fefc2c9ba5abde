"""`make bench`: speed figures measured side by side in one run, written as a table to BENCHMARKS.md.

Each figure is a ratio against a baseline measured in the same process on the same data, so machine load
moves both sides alike. Absolute numbers are for this machine only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras

from benchmarks import reference
from components.example_gen.sources import rotten_tomatoes_reviews
from components.trainer.data import (
    bucket_by_length,
    chosen_batch_widths,
    packed_batches,
    train_lengths,
    without_autotuning,
)
from components.trainer.module import compile_for_training
from components.trainer.training_meter import TrainingMeter, record_batch_shapes
from models.encoders.from_folder import build_classifier, read_model_folder
from models.hardware.cpu_features import cpu_supports_bf16
from models.hardware.flops import BatchShapes
from models.hardware.machine_peak import matmul_peak
from models.hub.pretrained import packaged_model_dir
from models.serving.signatures import model_logits
from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec
from models.training.config import ModelConfig, TrainingConfig
from models.training.packing import choose_packing
from pipeline.config.pipeline_config import PipelineConfig, load_config
from pipeline.machine.estimate import DEFAULT_RUN_FILE, train_split_lengths

MAX_LEN, BATCH = 64, 32
# tests/model_families.py's family -> the name a row gives it
FAMILY_BENCHMARKS = {
    "roberta": "RoBERTa-style",
    "xlm-roberta": "XLM-R-style",
    "albert": "ALBERT-style",
    "deberta-v2": "DeBERTa-v3-style",
}


@dataclasses.dataclass
class Row:
    name: str
    value: str
    baseline: str
    ratio: str


def corpus(n: int | None = None) -> list[str]:
    texts = rotten_tomatoes_reviews()["text"]
    return list(texts[:n] if n else texts)


def tokenized(texts, spec) -> dict[str, np.ndarray]:
    features = InGraphTokenizer(spec, MAX_LEN)(tf.constant(texts))
    return {k: features[k].numpy() for k in spec.model_input_names}


def _examples_per_second(model, dataset, steps, records: list | None = None) -> float:
    """Examples/s over `steps` after a warm-up; the timed batches' shapes go to `records` if given."""
    model.fit(dataset.take(3), steps_per_epoch=3, epochs=1, verbose=0)  # trace and warm up
    timed = dataset if records is None else record_batch_shapes(dataset, records)
    started = time.perf_counter()
    model.fit(timed, steps_per_epoch=steps, epochs=1, verbose=0)
    return steps * BATCH / (time.perf_counter() - started)


def _utilization_row(name: str, model, records, steps: int, examples_per_second: float, peak) -> Row:
    """Model FLOP/s of the timed steps (their real padded shapes) against the peak measured in this run."""
    meter = TrainingMeter(model.encoder_shape(), peak, records=records)
    gflops = meter.model_gflops(steps, steps * BATCH / examples_per_second)
    return Row(name, f"{gflops:.1f} GFLOP/s", f"{peak.gflops:.0f} GFLOP/s peak", f"{gflops / peak.gflops:.0%}")


def training_examples(steps: int):
    """The packaged MiniLM's files and enough real reviews for `steps` batches (tokenized, labels alternating),
    repeated: what the Trainer-loop benchmarks train on. Without tf.data's autotuning, as in the Trainer:
    with it each timed fit could end up to 10 s after its last step."""
    files = read_model_folder(packaged_model_dir("all-MiniLM-L6-v2"))
    texts = corpus(steps * BATCH * 2)
    features = tokenized(texts, tokenizer_spec(files.directory))
    labels = np.arange(len(texts)) % 2
    return files, without_autotuning(tf.data.Dataset.from_tensor_slices((features, labels)).repeat())


def trainer_batches(examples: tf.data.Dataset, training: TrainingConfig) -> tf.data.Dataset:
    """Batches as the Trainer's loop takes them: packed where training.packing chooses to (auto: on these texts),
    else cut to the batch widths (auto: chosen on these texts)."""
    profile = train_lengths(examples.batch(BATCH))
    buckets = chosen_batch_widths(training.batch_widths, MAX_LEN, profile)
    if choose_packing(training.packing, profile.lengths, BATCH, MAX_LEN, buckets.padded_share).packed:
        return packed_batches(examples.batch(BATCH, drop_remainder=True), MAX_LEN)
    return bucket_by_length(examples.batch(BATCH), BATCH, buckets.buckets, MAX_LEN)


def _fresh_model(files, policy="float32"):
    """The classifier built anew under `policy`, seeded alike for every variant compared."""
    tf_keras.mixed_precision.set_global_policy(policy)
    tf_keras.utils.set_random_seed(0)
    model = build_classifier(files, ["rotten", "fresh"])[0]
    model.bound_width(MAX_LEN)  # as the Trainer bounds it
    return model


def _plain_keras_rate(files, examples, steps: int) -> float:
    """The seeds' way: fixed-width batches, Adam, model.fit (examples/s)."""
    plain = _fresh_model(files)
    plain.compile(
        optimizer=tf_keras.optimizers.Adam(5e-5), loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return _examples_per_second(plain, examples.batch(BATCH, drop_remainder=True), steps)


def trainer_throughput(steps: int) -> list[Row]:
    files, examples = training_examples(steps)
    training = TrainingConfig()
    baseline = _plain_keras_rate(files, examples, steps)
    ours = _fresh_model(files)  # the Trainer's way: batch widths, AdamW schedule
    compile_for_training(ours, training, steps)
    pipeline_data = trainer_batches(examples, training)
    fp32_records, bf16_records = [], []
    fp32 = _examples_per_second(ours, pipeline_data, steps, fp32_records)
    packed_records, unpacked_records = [], []  # the default (packing auto) against each way forced
    packed_data = trainer_batches(examples, training.model_copy(update={"packing": True}))
    packed = _examples_per_second(ours, packed_data, steps, packed_records)
    unpacked_data = trainer_batches(examples, training.model_copy(update={"packing": False}))
    unpacked = _examples_per_second(ours, unpacked_data, steps, unpacked_records)
    bf16_model = _fresh_model(files, "mixed_bfloat16")
    compile_for_training(bf16_model, training, steps)
    bf16_steps = max(steps // 3, 3)
    bf16 = _examples_per_second(bf16_model, pipeline_data, bf16_steps, bf16_records)
    tf_keras.mixed_precision.set_global_policy("float32")
    native = "native" if cpu_supports_bf16() else "emulated: no AMX/AVX512-BF16 on this CPU"
    fp32_peak, bf16_peak = matmul_peak("float32"), matmul_peak("bfloat16")
    fp32_what = "Trainer loop, fp32: model FLOP/s vs this machine's fp32 matmul peak"
    bf16_what = f"Trainer loop, bf16: model FLOP/s vs this machine's bf16 matmul peak ({native})"
    return [
        _utilization_row(fp32_what, ours, fp32_records, steps, fp32, fp32_peak),
        _utilization_row(bf16_what, bf16_model, bf16_records, bf16_steps, bf16, bf16_peak),
        Row(
            "Trainer loop vs plain Keras fit (examples/s)", f"{fp32:.1f}", f"{baseline:.1f}", f"{fp32 / baseline:.2f}x"
        ),
        Row(
            "Trainer loop, texts packed in rows (training.packing) vs one a row at the batch widths (examples/s; "
            "padding share)",
            f"{packed:.1f}; {BatchShapes.of(packed_records[:steps]).padding_share:.0%}",
            f"{unpacked:.1f}; {BatchShapes.of(unpacked_records[:steps]).padding_share:.0%}",
            f"{packed / unpacked:.2f}x",
        ),
        Row(
            f"bf16 vs fp32, Trainer loop (examples/s; bf16 {native})",
            f"{bf16:.1f}",
            f"{fp32:.1f}",
            f"{bf16 / fp32:.2f}x",
        ),
    ]


def step_breakdown(steps: int) -> list[Row]:
    """Where a Trainer step's time goes (benchmarks.step_profile), in its own process: it runs one op at a time,
    and TensorFlow fixes that when it starts."""
    command = [sys.executable, "-m", "benchmarks.step_profile", "--steps", str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return [Row(**row) for row in json.loads(done.stdout.strip().splitlines()[-1])]


def _texts_per_second(fn, texts: list[str], batch: int = 1024) -> float:
    """Best of three passes over `texts` in batches of `batch`."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for i in range(0, len(texts), batch):
            fn(texts[i : i + batch])
        best = min(best, time.perf_counter() - started)
    return len(texts) / best


def _transform_seconds(model_dir: Path, texts: list[str]) -> float:
    """The Transform's own work on `texts`: preprocessing_fn analysed and applied by tf.Transform on Beam's
    local runner (the TFX component adds its artifact I/O around the same pass)."""
    import tempfile

    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from components.transform.config import TransformSettings
    from components.transform.module import preprocessing_fn
    from models.names import LABEL_FEATURE, TEXT_FEATURE

    model = ModelConfig(name=str(model_dir), max_seq_length=MAX_LEN)
    custom_config = TransformSettings(model=model, length_slice_edges=(16, 32)).to_custom_config()
    schema = schema_utils.schema_from_feature_spec(
        {TEXT_FEATURE: tf.io.FixedLenFeature([], tf.string), LABEL_FEATURE: tf.io.FixedLenFeature([], tf.int64)}
    )
    rows = [{TEXT_FEATURE: text.encode(), LABEL_FEATURE: i % 2} for i, text in enumerate(texts)]
    with tempfile.TemporaryDirectory() as scratch, tft_beam.Context(temp_dir=scratch, force_tf_compat_v1=False):
        started = time.perf_counter()
        (transformed, _), _ = (rows, dataset_metadata.DatasetMetadata(schema)) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing_fn(inputs, custom_config)
        )
        assert len(transformed) == len(texts)
        return time.perf_counter() - started


def tokenization_throughput(corpus_rows: int | None = None) -> list[Row]:
    """Each tokenizer family in-graph against HF's fast tokenizer on the same texts (batches of 1,024, padded to
    MAX_LEN), and the Transform's pass over the corpus against WordPiece's (the better of two, after a warm-up).
    The other families' models are built as the tests build them (tests/model_families.py): only their
    tokenizers matter here."""
    import tempfile

    from transformers import AutoTokenizer

    from tests.model_families import write_tokenizer

    texts = corpus(corpus_rows)
    rows, transform_seconds = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        families = {"MiniLM (packaged)": packaged_model_dir("all-MiniLM-L6-v2")}
        for family, name in FAMILY_BENCHMARKS.items():
            write_tokenizer(family, Path(scratch) / family)
            families[name] = Path(scratch) / family
        _transform_seconds(families["MiniLM (packaged)"], texts[:500])  # Beam's and TFT's first-use costs
        for name, directory in families.items():
            spec, hf = tokenizer_spec(directory), AutoTokenizer.from_pretrained(directory)
            tokenizer = InGraphTokenizer(spec, MAX_LEN)
            graph = tf.function(
                lambda t, tokenizer=tokenizer: tokenizer(t), input_signature=[tf.TensorSpec([None], tf.string)]
            )
            graph(tf.constant(texts[:8]))
            ours = _texts_per_second(lambda batch, graph=graph: graph(tf.constant(batch)), texts)
            theirs = _texts_per_second(
                lambda batch, hf=hf: hf(batch, padding="max_length", truncation=True, max_length=MAX_LEN), texts
            )
            rows.append(
                Row(
                    f"in-graph tokenization vs HF fast, {spec.family}: {name} (texts/s)",
                    f"{ours:,.0f}",
                    f"{theirs:,.0f}",
                    f"{ours / theirs:.2f}x",
                )
            )
            transform_seconds[name] = min(_transform_seconds(directory, texts) for _ in range(2))
    wordpiece = transform_seconds.pop("MiniLM (packaged)")
    for name, seconds in transform_seconds.items():
        rows.append(
            Row(
                f"Transform pass over {len(texts):,} texts, {name} vs MiniLM's WordPiece (s)",
                f"{seconds:.1f}",
                f"{wordpiece:.1f}",
                f"{seconds / wordpiece:.2f}x",
            )
        )
    return rows


def _percentiles(fn, repeats: int) -> tuple[float, float]:
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), float(np.percentile(times, 99))


def serving_latency(serving_dir: Path, repeats: int) -> list[Row]:
    from transformers import AutoTokenizer

    from models.serving.pushed_model import load_serving_model

    try:
        _, exported = load_serving_model(serving_dir)
    except FileNotFoundError:
        return [Row(f"serving latency: no pushed model under {serving_dir} (run `make run` first)", "-", "-", "-")]
    directory = packaged_model_dir("all-MiniLM-L6-v2")
    hf = AutoTokenizer.from_pretrained(directory)
    model = build_classifier(read_model_folder(directory), ["rotten", "fresh"])[0]
    call = tf.function(lambda inputs: tf.nn.softmax(model_logits(model, inputs)))
    texts = corpus(32)
    signature = exported.signatures["serving_default"]
    rows = []
    for batch in (1, 32):
        sample = texts[:batch]
        ours = _percentiles(lambda s=sample: signature(text=tf.constant(s)), repeats)
        theirs = _percentiles(
            lambda s=sample: call(
                dict(hf(s, padding="max_length", truncation=True, max_length=MAX_LEN, return_tensors="np"))
            ),
            repeats,
        )
        rows.append(
            Row(
                f"serving p50 / p99 ms, batch {batch}: exported model vs Python HF tokenizer + model",
                f"{ours[0]:.1f} / {ours[1]:.1f}",
                f"{theirs[0]:.1f} / {theirs[1]:.1f}",
                f"{ours[0] / theirs[0]:.2f}x",
            )
        )
    return rows


def serving_load(serving_dir: Path, seconds: float) -> list[Row]:
    """benchmarks/serving_load.py's rows: the dynamic-batching server against one call per request."""
    from benchmarks import serving_load
    from models.serving.pushed_model import resolve_version_dir

    try:
        resolve_version_dir(serving_dir)
    except FileNotFoundError:
        return [Row(f"serving load: no pushed model under {serving_dir} (run `make run` first)", "-", "-", "-")]
    return [Row(*row) for row in serving_load.rows(str(serving_dir), corpus(2000), seconds)]


def monitor_throughput(run_config, serving_dir: Path) -> list[Row]:
    """benchmarks/monitoring.py's row: `hftfx monitor` over 100,000 logged rows, time and peak memory."""
    from benchmarks import monitoring
    from models.serving.pushed_model import resolve_version_dir

    try:
        resolve_version_dir(serving_dir)
    except FileNotFoundError:
        return [Row(f"monitor: no pushed model under {serving_dir} (run `make run` first)", "-", "-", "-")]
    peak = matmul_peak("float32")
    seconds, gib = monitoring.measure(run_config, str(serving_dir), corpus())
    return [
        Row(
            f"hftfx monitor over {monitoring.ROWS:,} logged rows with a queue of 50: time, peak memory",
            f"{seconds:.0f} s, {gib:.2f} GiB",
            f"{peak.gflops:.0f} GFLOP/s fp32 peak",
            f"{monitoring.ROWS / seconds:,.0f} rows/s",
        )
    ]


def _useful_forward_flops(model_dir: Path, texts: list[str], max_length: int) -> float:
    """Forward FLOPs of the texts at their own token counts (no padding): the work any scorer must do."""
    from transformers import AutoTokenizer

    lengths = np.array(
        [
            len(ids)
            for ids in AutoTokenizer.from_pretrained(model_dir)(texts, truncation=True, max_length=max_length)[
                "input_ids"
            ]
        ]
    )
    shape = read_model_folder(Path(model_dir), weights=False).shape  # two labels, as the run's
    return shape.forward_flops(len(texts), lengths.sum(), (lengths**2).sum())


def batch_prediction_throughput(serving_dir: Path, rows: int) -> list[Row]:
    """`hftfx predict --input` (Beam RunInference, whole job: read, score, write) against a Python loop over
    serving_default in batches of 32, on the same rows of the corpus, with the matmul peak measured now."""
    import tempfile

    from components.scorer.job import run_batch_prediction
    from components.scorer.records import BatchJob
    from models.serving.pushed_model import load_serving_model
    from pipeline.config.pipeline_config import LOCAL_BEAM_RUNNER

    try:
        version_dir, exported = load_serving_model(serving_dir)
    except FileNotFoundError:
        return [Row(f"batch prediction: no pushed model under {serving_dir} (run `make run` first)", "-", "-", "-")]
    texts = (corpus() * (rows // len(corpus()) + 1))[:rows]
    signature = exported.signatures["serving_default"]
    signature(text=tf.constant(texts[:32]))  # traced and warm before the clock starts
    started = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        signature(text=tf.constant(texts[i : i + BATCH]))["probabilities"].numpy()
    loop_seconds = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="bench-predict-") as folder:
        source = Path(folder) / "rows.jsonl"
        source.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
        job = BatchJob(model=str(version_dir), input=str(source), output=str(Path(folder) / "scored.jsonl"))
        summary = run_batch_prediction(job, [f"--runner={LOCAL_BEAM_RUNNER}"], stream=sys.stderr)
    assert summary.rows == rows, f"batch prediction scored {summary.rows} of {rows} rows"
    peak = matmul_peak("float32")
    max_length = train_split_lengths(load_config()).width  # the default run's, which pushed the model measured
    flops = _useful_forward_flops(packaged_model_dir("all-MiniLM-L6-v2"), texts, max_length)
    loop_rate, job_rate = rows / loop_seconds, summary.rows_per_second
    return [
        Row(
            f"batch prediction, {rows:,} corpus rows: `hftfx predict --input` (whole job) vs serving_default in "
            "Python batches of 32, rows/s",
            f"{job_rate:,.0f}",
            f"{loop_rate:,.0f}",
            f"{job_rate / loop_rate:.2f}x",
        ),
        Row(
            f"batch prediction: model GFLOP/s at the texts' own lengths vs the {peak.describe()} (measured now)",
            f"{flops * job_rate / rows / 1e9:.1f} ({flops * job_rate / rows / 1e9 / peak.gflops:.0%} of peak)",
            f"{flops * loop_rate / rows / 1e9:.1f} ({flops * loop_rate / rows / 1e9 / peak.gflops:.0%} of peak)",
            "-",
        ),
    ]


def reference_figures(config: PipelineConfig) -> dict | None:
    """The latest default run's headline figures (ML Metadata and its summary JSON), the one place they are
    written: `hftfx doctor`'s estimate reads them, README quotes the headline."""
    from pipeline.reporting.metadata_reader import summarize
    from pipeline.reporting.report import run_summary_json_path

    summary = summarize(config.metadata_sqlite, config.pipeline_name)
    recorded_path = run_summary_json_path(config, summary.run_id) if summary else None
    if summary is None or not recorded_path.is_file() or not summary.throughput.get("utilization"):
        return None
    recorded, throughput = json.loads(recorded_path.read_text()), summary.throughput
    return {
        "run_id": summary.run_id,
        "host": platform.node(),
        "matmul_peak_gflops": round(throughput["matmul_peak_gflops"], 1),
        "accuracy": round(summary.metrics["accuracy"], 4),
        "auc": round(summary.metrics["auc"], 4),
        "macro_f1": round(summary.metrics.get("macro_f1", float("nan")), 4),
        "wall_seconds": round(recorded["wall_seconds"], 1),
        "training_loop_seconds": round(throughput["train_seconds"], 1),
        "seconds_outside_training": round(recorded["wall_seconds"] - throughput["train_seconds"], 1),
        "trainer_utilization": round(throughput["utilization"], 3),
        "peak_memory_gib": round(recorded["peak_rss_bytes"] / 2**30, 2),
    }


def write_reference(config: PipelineConfig, bench: dict | None = None, run_figures: bool = True) -> None:
    """The default run's figures (from the latest run's records, unless not `run_figures`) and, given, this
    bench's table."""
    if run_figures:
        figures = reference_figures(config)
        if figures is None:
            print(f"no default run with a summary under {config.pipeline_root}: {DEFAULT_RUN_FILE} kept", flush=True)
        else:
            DEFAULT_RUN_FILE.write_text(json.dumps({"written_by": "make bench", **figures}, indent=2) + "\n")
            print(f"default run figures written to {DEFAULT_RUN_FILE}", flush=True)
    if bench is not None:
        reference.write({**reference.read(), "bench": bench})
        print(f"bench figures written to {reference.REFERENCE}", flush=True)


def pipeline_figures(config: PipelineConfig) -> list[Row]:
    """The latest run's component times and utilization (ML Metadata), wall time and memory (its summary JSON)."""
    from pipeline.config.node_ids import TRAINER
    from pipeline.reporting.metadata_reader import summarize
    from pipeline.reporting.report import run_summary_json_path

    summary = summarize(config.metadata_sqlite, config.pipeline_name)
    if summary is None:
        return [Row(f"pipeline: no run recorded under {config.pipeline_root} (run `make run` first)", "-", "-", "-")]
    total = sum(c.seconds for c in summary.components)
    trainer = sum(c.seconds for c in summary.components if c.name == TRAINER)
    rows = [Row(f"component {c.name} ({c.state}) seconds", f"{c.seconds:.1f}", "-", "-") for c in summary.components]
    rows.append(
        Row("share of component time outside the Trainer", f"{(total - trainer) / max(total, 1e-9):.0%}", "-", "-")
    )
    throughput = summary.throughput
    if throughput.get("utilization") is not None:
        rows.append(
            Row(
                "whole run, Trainer: model FLOP/s vs the matmul peak it measured",
                f"{throughput['model_gflops_per_second']:.1f} GFLOP/s",
                f"{throughput['matmul_peak_gflops']:.0f} GFLOP/s peak",
                f"{throughput['utilization']:.0%}",
            )
        )
    recorded_path = run_summary_json_path(config, summary.run_id)
    if recorded_path.is_file():
        recorded = json.loads(recorded_path.read_text())
        memory = recorded["peak_rss_bytes"] / 2**30
        rows.append(
            Row("whole run: wall seconds / peak memory GiB", f"{recorded['wall_seconds']:.0f} / {memory:.2f}", "-", "-")
        )
        if throughput.get("matmul_peak_gflops"):
            # Seconds x what the machine can do: comparable across machines, lower is better.
            cost = recorded["wall_seconds"] * throughput["matmul_peak_gflops"] / 1e3
            rows.append(
                Row("whole run: wall seconds x machine peak (TFLOP of peak capacity)", f"{cost:,.0f}", "-", "-")
            )
    return rows


def bench_table(rows: list[Row], seconds: float) -> dict:
    """This run's table as data, with the machine it ran on."""
    threads = tf.config.threading.get_intra_op_parallelism_threads() or "all"
    machine = (
        f"{platform.node()} ({platform.processor() or platform.machine()}, {threads} threads, TF {tf.__version__})"
    )
    return {"machine": machine, "seconds": round(seconds), "rows": [dataclasses.asdict(r) for r in rows]}


SECTIONS = (
    "tokenization", "serving", "serving-load", "monitor", "batch-prediction", "trainer", "step-profile", "pipeline"
)


def merged_bench(previous: dict | None, fresh: dict, sections: list[str]) -> dict:
    """The previous table with this run's rows in place of those of the same name (new ones appended)."""
    if not previous:
        return fresh
    by_name = {row["name"]: row for row in fresh["rows"]}
    kept = [by_name.pop(row["name"], row) for row in previous["rows"]]
    note = f"{previous.get('machine', '')} (the rows of {', '.join(sections)} from a later run on {fresh['machine']})"
    return {**previous, "machine": note, "rows": [*kept, *by_name.values()]}


def _sections(args, run_config) -> dict:
    """Each section's rows, measured when called."""
    serving_dir = Path(args.serving_dir)
    return {
        "tokenization": lambda: tokenization_throughput(args.corpus_rows),
        "serving": lambda: serving_latency(serving_dir, args.repeats),
        "serving-load": lambda: serving_load(serving_dir, args.load_seconds),
        "monitor": lambda: monitor_throughput(run_config, serving_dir),
        "batch-prediction": lambda: batch_prediction_throughput(serving_dir, args.batch_rows),
        "trainer": lambda: trainer_throughput(args.steps),
        "step-profile": lambda: step_breakdown(args.profiled_steps),
        "pipeline": lambda: pipeline_figures(run_config),
    }


def main(argv=None) -> int:
    defaults = PipelineConfig()  # pydantic keeps field defaults on instances, not on the class
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30, help="training steps per measurement")
    parser.add_argument("--profiled-steps", type=int, default=20, help="training steps in the step profile")
    parser.add_argument("--repeats", type=int, default=50, help="requests per latency measurement")
    parser.add_argument("--batch-rows", type=int, default=20_000, help="rows per batch prediction measurement")
    parser.add_argument("--corpus-rows", type=int, help="reviews the tokenizers and Transform pass over (default: all)")
    parser.add_argument("--serving-dir", default=str(Path(defaults.serving_dir, defaults.model_name)))
    parser.add_argument("--pipeline-root", default=defaults.pipeline_root)
    parser.add_argument("--pipeline-name", default=defaults.pipeline_name)
    parser.add_argument("--load-seconds", type=float, default=10.0, help="per client count, per server")
    parser.add_argument(
        "--sections", help=f"comma-separated, of {', '.join(SECTIONS)} (default: all); the others' rows are kept"
    )
    parser.add_argument("--out", default="BENCHMARKS.md")
    parser.add_argument(
        "--reference-only",
        action="store_true",
        help="only write the default run's figures (pipeline/machine/default_run.json) from the latest run",
    )
    args = parser.parse_args(argv)
    run_config = load_config(overrides={"pipeline_root": args.pipeline_root, "pipeline_name": args.pipeline_name})
    if args.reference_only:
        write_reference(run_config)
        return 0
    started = time.perf_counter()
    sections = _sections(args, run_config)
    chosen = args.sections.split(",") if args.sections else list(sections)
    rows = []
    for name in chosen:
        new = sections[name]()
        for row in new:
            print(f"{row.name}: {row.value} (baseline {row.baseline}, {row.ratio})", flush=True)
        rows += new
    table = bench_table(rows, time.perf_counter() - started)
    if args.sections:  # the rows of the sections not run now stay as measured before, where they were
        table = merged_bench(reference.read().get("bench"), table, chosen)
    write_reference(run_config, table, run_figures=not args.sections)
    reference.render_into(Path(args.out))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`hftfx`: run the pipeline locally, check the environment, and ask a pushed model for predictions."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from components import run_parameters
from components.scorer.records import DEFAULT_BATCH_SIZE
from models.errors import UserError
from models.serving.config import ServingConfig
from models.serving.precision import BF16_DRIFT_LIMIT, SERVING_PRECISIONS
from pipeline.cli.commands import (
    cmd_compile,
    cmd_doctor,
    cmd_function_source,
    cmd_label,
    cmd_monitor,
    cmd_predict,
    cmd_promote,
    cmd_report,
    cmd_run,
    cmd_runs,
    cmd_schedule,
    cmd_serve,
    cmd_serve_check,
    cmd_submit,
    cmd_trigger,
    flag_dest,
)
from pipeline.config.reference import run_flags

TEMPLATE_HELP = "the compiled spec (default: the one committed for --config: pipeline.yaml, pipeline-retraining.yaml)"


# Options several commands share, each declared once as an argparse parent parser.
def _config_options(
    default: str | None = None, about: str = "YAML file with config overrides"
) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--config", default=default, help=f"{about} (keys: docs/config.md)")
    parent.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="any config key (docs/config.md), e.g. training.warmup_ratio=0.2",
    )
    return parent


def _run_flag_options() -> argparse.ArgumentParser:
    """The config fields that declare a flag (pipeline/config/reference.py); values are checked by the config."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("config flags (each sets the key in brackets; docs/config.md has every key)")
    for run_flag in run_flags():
        text = f"{run_flag.help} [{run_flag.key}]".replace("%", "%%")
        group.add_argument(run_flag.flag, dest=flag_dest(run_flag.flag), metavar=run_flag.metavar, help=text)
    return parent


def _flag(name: str, text: str) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(name, action="store_true", help=text)
    return parent


def _template_option(when: str = "") -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--template", help=when + TEMPLATE_HELP)
    return parent


@dataclasses.dataclass(frozen=True)
class SharedOptions:
    """Option groups several commands take (argparse parents)."""

    verbose: argparse.ArgumentParser
    dry_run: argparse.ArgumentParser
    cloud_config: argparse.ArgumentParser
    run_config: argparse.ArgumentParser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hftfx", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    shared = SharedOptions(
        verbose=_flag("--verbose", "show TFX's, Beam's and TensorFlow's own logs"),
        dry_run=_flag("--dry-run", "print the exact request and send nothing"),
        cloud_config=_config_options("configs/vertex.yaml", "config with a cloud profile"),
        run_config=_config_options(about="the run's config, for pipeline_root and pipeline_name"),
    )
    for add in (
        _add_doctor_commands,
        _add_run_commands,
        _add_predict_commands,
        _add_serving_commands,
        _add_cloud_commands,
        _add_retraining_commands,
        _add_monitoring_commands,
    ):
        add(commands, shared)
    return parser


def _add_doctor_commands(commands, shared: SharedOptions) -> None:
    """`hftfx doctor`: the environment, or the cloud profile offline."""
    doctor = commands.add_parser(
        "doctor",
        parents=[shared.cloud_config],
        help="print the environment and check every import and packaged file; --cloud: the cloud profile",
    )
    doctor.add_argument(
        "--cloud", action="store_true", help="check the profile, its compiled spec and credentials offline; list IAM"
    )
    doctor.add_argument("--template", help="the compiled spec to check (default: the one committed for --config)")
    doctor.add_argument(
        "--estimate",
        action="store_true",
        help="what training --config's data takes on its Vertex AI placement and workers: time, price on demand "
        "and on Spot VMs",
    )
    doctor.set_defaults(handler=cmd_doctor)


def _add_run_commands(commands, shared: SharedOptions) -> None:
    """`hftfx run`: the local pipeline."""
    run = commands.add_parser(
        "run",
        parents=[_config_options(), _run_flag_options(), shared.verbose],
        help="run the pipeline locally (LocalDagRunner, sqlite ML Metadata)",
    )
    run.add_argument("--no-cache", action="store_true", help="re-run every component instead of reusing results")
    run.add_argument("--summary-json", help="also write the run summary as JSON to this file")
    run.add_argument(
        "--check",
        action="store_true",
        help="check everything a run checks before its first component (config, data sample, labels, model, "
        "served contract, each component's settings), then stop",
    )
    run.set_defaults(handler=cmd_run)


def _add_predict_commands(commands, shared: SharedOptions) -> None:
    """`hftfx predict`: texts, a file (Beam RunInference) or a Vertex batch job."""
    predict = commands.add_parser("predict", help="classify texts with a pushed model")
    predict.add_argument(
        "--model",
        help="a pushed model: serving/<name> (newest version) or a version dir; with --on vertex a Vertex Model "
        "(default: the one the profile's endpoint serves)",
    )
    predict.add_argument("texts", nargs="*", help="texts to classify (default: lines from stdin)")
    predict.add_argument(
        "--pair-separator", default="\t", help="for sentence-pair models: splits TEXT and TEXT_PAIR (default: tab)"
    )
    predict.add_argument("--input", help="score a file, glob or save_to_disk folder (.jsonl, .csv, .parquet)")
    predict.add_argument("--output", help="with --input: where the scored rows go (.jsonl, .csv or .parquet)")
    predict.add_argument("--text-column", default="text", help="with --input: the column holding the text")
    predict.add_argument("--text-pair-column", help="with --input: the second text's column (sentence-pair models)")
    predict.add_argument(
        "--id-columns", help="with --input: comma-separated columns copied to the output (default: all but the texts)"
    )
    predict.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="with --input: rows per model call")
    predict.add_argument(
        "--beam-arg", action="append", help="with --input: a Beam pipeline option, e.g. --beam-arg=--runner=..."
    )
    predict.add_argument(
        "--on", choices=("local", "vertex"), default="local",
        help="vertex: a Vertex AI batch prediction job over gs:// JSON lines, with the profile given by --config",
    )  # fmt: skip
    predict.add_argument(
        "--config", help="with --on vertex: the cloud profile (e.g. configs/vertex.yaml); with --input: serving.log_*"
    )
    predict.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    predict.add_argument("--max-replicas", type=int, default=4, help="with --on vertex: most machines the job uses")
    _add_precision_option(predict)
    _add_log_options(predict)
    predict.set_defaults(handler=cmd_predict)


def _add_serving_commands(commands, shared: SharedOptions) -> None:
    """`hftfx report`, `serve-check`, `serve`: a run's page and a pushed model as TF Serving / Vertex see it."""
    report = commands.add_parser(
        "report", parents=[shared.run_config], help="write the HTML report of the latest run (from ML Metadata)"
    )
    report.add_argument("--output", help="where to write the page (default <pipeline_root>/reports/<run>.html)")
    report.set_defaults(handler=cmd_report)

    serve_check = commands.add_parser(
        "serve-check", help="load a pushed model as TF Serving does, check its ops, replay warm-up, send requests"
    )
    serve_check.add_argument("model", help="a pushed model: serving/<name> (newest version) or a version dir")
    serve_check.add_argument("--request", help='a REST body (JSON text or file), e.g. \'{"instances": ["great"]}\'')
    serve_check.set_defaults(handler=cmd_serve_check)

    serve = commands.add_parser(
        "serve",
        parents=[_config_options(about="a config: its serving.log_* keys set the prediction log")],
        help="serve a pushed model over HTTP as a Vertex AI custom container (the image's default command)",
    )
    serve.add_argument("--model", help="a model folder, local or gs:// (default: $AIP_STORAGE_URI, set by Vertex AI)")
    serve.add_argument("--port", type=int, help="default: $AIP_HTTP_PORT, else 8080")
    serve.add_argument("--host", help="default: all interfaces in a Vertex container ($AIP_HTTP_PORT), else 127.0.0.1")
    serve.add_argument("--max-batch", type=int, help="rows per model call (default 64)")
    serve.add_argument("--batch-wait-ms", type=float, help="how long a call waits for more requests (default 0)")
    serve.add_argument("--max-body-mb", type=float, help="largest request body (default 1.5, Vertex AI's limit)")
    serve.add_argument("--max-instances", type=int, help="instances per request (default 256)")
    serve.add_argument("--header-timeout", type=float, help="seconds to receive a request's headers (default 10)")
    serve.add_argument("--read-timeout", type=float, help="seconds to receive a body (default 10)")
    serve.add_argument(
        "--write-timeout", type=float, help="seconds for a client to take answers queued for it (default 10)"
    )
    serve.add_argument(
        "--max-requests-per-connection", type=int, help="answers on one connection before it closes (default 1000)"
    )
    serve.add_argument("--max-queued-rows", type=int, help="rows waiting for the model before a 503 (default 1024)")
    serve.add_argument("--max-call-mb", type=float, help="text MB per model call (default 4)")
    _add_precision_option(serve)
    _add_log_options(serve)
    serve.set_defaults(handler=cmd_serve)


def _add_precision_option(parser) -> None:
    parser.add_argument(
        "--precision", choices=SERVING_PRECISIONS, default="auto",
        help="auto (default): bf16 on CPUs that compute it natively (AVX512-BF16, AMX) when the model's warm-up "
        f"answers stay within {BF16_DRIFT_LIMIT:g} of fp32's, else fp32; the SavedModel itself stays fp32",
    )  # fmt: skip


def _add_log_options(parser) -> None:
    """The prediction log's options, the same for `hftfx serve` and `hftfx predict --input`: each overrides its
    `serving.log_*` key (models/serving/config.py), which checks the values."""
    log = parser.add_argument_group("prediction log (what `hftfx monitor` reads; off unless --log-dir)")
    for key, field in ServingConfig.model_fields.items():
        default = f", default {field.default}" if field.default != "" else ""
        log.add_argument(f"--{key.replace('_', '-')}", help=f"{field.description} (serving.{key}{default})")


def _add_cloud_commands(commands, shared: SharedOptions) -> None:
    """`hftfx compile`, `function-source`, `submit`: specs and runs for Vertex AI and Kubeflow."""
    compile_ = commands.add_parser(
        "compile", parents=[shared.cloud_config], help="compile pipeline.yaml for Vertex AI / Kubeflow (offline)"
    )
    compile_.add_argument(
        "--output", help="where to write the spec (default: the committed spec of the config, e.g. pipeline.yaml)"
    )
    compile_.set_defaults(handler=cmd_compile)

    function_source = commands.add_parser(
        "function-source",
        parents=[_config_options("configs/vertex-retraining.yaml", "the retraining profile the function sends")],
        help="write the storage-event Cloud Run function's source folder (main.py, requirements.txt, spec)",
    )
    function_source.add_argument("--output", required=True, help="a new folder: gcloud's --source")
    function_source.set_defaults(handler=cmd_function_source)

    submit_ = commands.add_parser(
        "submit",
        parents=[shared.cloud_config, _template_option(), shared.dry_run],
        help="submit pipeline.yaml to Vertex AI Pipelines or Kubeflow",
    )
    submit_.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help=f"runtime parameter: {', '.join(run_parameters.NAMES)}",
    )
    submit_.add_argument(
        "--kfp-host",
        help="send to this Kubeflow Pipelines API instead of Vertex AI (a profile with cloud.orchestrator: kubeflow)",
    )
    submit_.set_defaults(handler=cmd_submit)
    promote = commands.add_parser(
        "promote",
        parents=[shared.cloud_config],
        help="end a canary (cloud.endpoint_traffic_percentage): the endpoint's newest model takes 100% of the traffic",
    )
    promote.set_defaults(handler=cmd_promote)


def _add_retraining_commands(commands, shared: SharedOptions) -> None:
    """`hftfx trigger`, `runs`, `schedule`: retraining on span data and the runs it made."""
    trigger = commands.add_parser(
        "trigger",
        parents=[
            _config_options(about="YAML config; its dataset needs a {SPAN} pattern"),
            _run_flag_options(),
            _template_option("--cloud: "),
            shared.verbose,
        ],
        help="retrain on new (or drifted) span data: check, run once, or watch; exactly once per span",
    )
    trigger.add_argument(
        "action",
        choices=["check", "run", "watch", "forget-span"],
        help="forget-span (--cloud --span N): cancel and delete span N's runs, a marker that should never have run",
    )
    trigger.add_argument("--no-cache", action="store_true", help=argparse.SUPPRESS)
    trigger.add_argument("--span", type=int, help="decide about this span only (default: the newest span)")
    trigger.add_argument("--drift", action="store_true", help="check: also measure drift under the new_data policy")
    trigger.add_argument("--interval", type=float, help="watch: seconds between polls (retraining.poll_seconds)")
    trigger.add_argument("--max-polls", type=int, help="watch: stop after this many polls")
    trigger.add_argument("--cloud", action="store_true", help="decide from Vertex pipeline jobs and submit there")
    trigger.add_argument("--dry-run", action="store_true", help="--cloud: print the request, send nothing")
    trigger.set_defaults(handler=cmd_trigger)

    runs = commands.add_parser(
        "runs",
        parents=[shared.run_config],
        help="list past runs from ML Metadata: spans, outcome, metrics, pushed version",
    )
    runs.add_argument("--json", action="store_true", help="print every run summary as JSON")
    runs.set_defaults(handler=cmd_runs)

    schedule = commands.add_parser(
        "schedule",
        parents=[
            _config_options("configs/vertex-retraining.yaml", "config with a cloud profile"),
            _template_option("create: "),
            shared.dry_run,
        ],
        help="Vertex AI schedules of the compiled pipeline",
    )
    schedule.add_argument("action", choices=["create", "list", "pause", "resume", "delete"])
    schedule.add_argument("schedule", nargs="?", help="pause/resume/delete: schedule id or resource name")
    schedule.add_argument("--cron", help="create: e.g. 'TZ=Europe/Paris 0 3 * * 1' (Mondays 03:00)")
    schedule.add_argument("--max-concurrent-runs", type=int, default=1, help="create: runs at once (default 1)")
    schedule.add_argument("--max-runs", type=int, help="create: stop after this many runs")
    schedule.set_defaults(handler=cmd_schedule)


def _add_monitoring_commands(commands, shared: SharedOptions) -> None:
    """`hftfx monitor`, `label`: what a served model answers against its training data, and labels coming back."""
    monitor = commands.add_parser(
        "monitor",
        parents=[shared.run_config],
        help="compare what a served model answered (its prediction log) with its training data; estimate accuracy",
    )
    source = monitor.add_mutually_exclusive_group()
    source.add_argument("--logs", help="the prediction log folder (default: the config's serving.log_dir)")
    source.add_argument(
        "--bigquery", help="a Vertex endpoint's request-response log table, bq://project.dataset.table (with --model)"
    )
    source.add_argument(
        "--endpoint",
        action="store_true",
        help="the cloud profile's endpoint (cloud.endpoint_name): its log table, and the model serving most traffic",
    )
    monitor.add_argument(
        "--model", help="the served version's folder, local or gs:// (default: serving_dir/model_name/<version>)"
    )
    monitor.add_argument(
        "--version", help="the model version (with --bigquery: the deployed model id) to read (default: the newest)"
    )
    monitor.add_argument("--since-hours", type=float, help="only rows of the last this many hours (default: all)")
    monitor.add_argument("--min-rows", type=int, help="fewest rows a window may have (default 200)")
    monitor.add_argument(
        "--json", help="where the JSON goes (default <logs, or .>/monitor/version=<v>/<time>.json)"
    )
    monitor.add_argument(
        "--queue", type=int, default=0, help="also write the N served texts most worth labeling, for Label Studio"
    )
    monitor.add_argument("--queue-file", help="where (default <logs, or .>/labeling/version=<v>/<time>.json)")
    monitor.add_argument(
        "--notify", help="a Pub/Sub topic told of a drifted window (default: cloud.notify_topic; 'none': no one)"
    )
    monitor.set_defaults(handler=cmd_monitor)

    label = commands.add_parser(
        "label",
        parents=[_config_options(about="YAML config; its dataset needs a {SPAN} pattern")],
        help="import labeled texts (Label Studio's JSON export, or a CSV of text,label) as the next span",
    )
    label.add_argument("action", choices=["import"])
    label.add_argument("file", help="Label Studio's JSON export, or a CSV with text and label columns")
    label.add_argument("--span", type=int, help="the span to write (default: one past the newest)")
    label.set_defaults(handler=cmd_label)


def main(argv: list[str] | None = None) -> int:
    from google.api_core.exceptions import GoogleAPIError

    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except UserError as error:
        print(f"hftfx: {error}", file=sys.stderr)
        return 2
    except GoogleAPIError as error:
        print(f"hftfx: the Google Cloud request failed, nothing was changed: {error}", file=sys.stderr)
        return 1


def run_quietly(argv: list[str] | None = None) -> int:
    """`main` as the `hftfx` command runs it: TensorFlow's start-up chatter hidden on machines without a GPU,
    unless --verbose (pipeline/cli/console.py)."""
    from pipeline.cli.console import without_startup_chatter

    if "--verbose" in (sys.argv[1:] if argv is None else argv):
        return main(argv)
    with without_startup_chatter():
        return main(argv)

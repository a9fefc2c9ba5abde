"""`hftfx`: run the pipeline locally, check the environment, and ask a pushed model for predictions."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import yaml

from components.batch_job import DEFAULT_BATCH_SIZE
from models.errors import UserError
from pipeline import configs, run_parameters

# flag -> dotted config key
RUN_FLAGS = {
    "--dataset": (
        "dataset.name",
        str,
        "HF dataset: hub id, builder (csv/parquet/json), a data file or glob (reviews.csv, data/*.jsonl: "
        "builder inferred), a save_to_disk folder, or packaged:...",
    ),
    "--dataset-config": ("dataset.config_name", str, "the dataset's configuration name"),
    "--dataset-revision": ("dataset.revision", str, "hub revision (branch, tag or commit)"),
    "--data-files": ("dataset.data_files", str, "comma-separated local files for csv/parquet/json builders"),
    "--text-column": ("dataset.text_column", str, "column holding the text"),
    "--text-pair-column": (
        "dataset.text_pair_column",
        str,
        "column holding the second text of sentence-pair tasks (paraphrase, entailment)",
    ),
    "--missing-text": ("dataset.missing_text", str, "rows with a missing text or label: error (default) or drop"),
    "--label-column": ("dataset.label_column", str, "column holding the label"),
    "--label-names": ("dataset.label_names", str, "comma-separated label set in id order"),
    "--train-limit": ("dataset.limits.train", int, "at most this many train examples"),
    "--eval-limit": ("dataset.limits.eval", int, "at most this many eval examples"),
    "--test-limit": ("dataset.limits.test", int, "at most this many test examples"),
    "--model": ("model.name", str, "HF model: hub id, local directory, or packaged:all-MiniLM-L6-v2"),
    "--max-seq-length": ("model.max_seq_length", int, "tokens per example, [CLS] and [SEP] included"),
    "--epochs": ("training.epochs", int, "training epochs"),
    "--batch-size": ("training.batch_size", int, "per-replica batch size"),
    "--learning-rate": ("training.learning_rate", float, "peak learning rate (AdamW, warm-up, linear decay)"),
    "--precision": ("training.precision", str, "auto, bf16 or fp32"),
    "--min-accuracy": ("evaluation.min_accuracy", float, "blessing needs at least this test accuracy"),
    "--min-auc": ("evaluation.min_auc", float, "blessing needs at least this test AUC"),
    "--pipeline-root": ("pipeline_root", str, "where artifacts and ML Metadata go"),
    "--serving-dir": ("serving_dir", str, "TF Serving model base directory"),
}
LIST_KEYS = {"dataset.data_files", "dataset.label_names"}


def _overrides(args: argparse.Namespace) -> dict:
    overrides = {}
    for flag, (key, _, _) in RUN_FLAGS.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            overrides[key] = [v.strip() for v in value.split(",") if v.strip()] if key in LIST_KEYS else value
    overrides.update(_assignments(args.set, "--set"))
    if args.no_cache:
        overrides["enable_cache"] = False
    return overrides


def cmd_run(args: argparse.Namespace) -> int:
    config = configs.load_config(args.config, _overrides(args))  # a config error exits 2 before TF and TFX load
    from pipeline.orchestration.local_runner import run_local
    from pipeline.reporting.report import write_run_report

    summary = run_local(config, verbose=args.verbose)
    print()
    print(summary.render())
    print(f"\nreport: {write_run_report(config, summary)}")
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary.to_json(), indent=2) + "\n", encoding="utf-8")
        print(f"\nsummary written to {args.summary_json}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pipeline.reporting.report import write_latest_report

    config = configs.load_config(args.config, _assignments(args.set, "--set"))
    print(f"report: {write_latest_report(config, args.output or None)}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    if args.cloud:
        return _cloud_doctor(args)
    from pipeline.machine import doctor

    for line in doctor.environment_lines():
        print(line)
    print()
    checks = doctor.run_checks()
    for check in checks:
        print(f"  [{'OK' if check.ok else 'FAIL'}] {check.name:<44} {check.detail}")
    failed = [c for c in checks if not c.ok]
    print(f"\n{len(checks) - len(failed)} of {len(checks)} checks OK")
    return 1 if failed else 0


def _cloud_doctor(args: argparse.Namespace) -> int:
    """`hftfx doctor --cloud`: the profile, its spec and credentials, offline; then the IAM roles it needs."""
    from pipeline.cloud.compiled_specs import COMPILED_PROFILES
    from pipeline.cloud.iam import offline_checks, role_lines

    config = configs.load_config(args.config, _assignments(args.set, "--set"))
    template = args.template or COMPILED_PROFILES.get(str(Path(args.config)))
    checks = offline_checks(config, template)
    for check in checks:
        state = "OK" if check.ok else ("FAIL" if check.required else "WARN")
        print(f"  [{state}] {check.name:<14} {check.detail}")
    print("\nIAM roles this profile needs (not checked offline: gcloud projects get-iam-policy PROJECT):")
    for line in role_lines(config):
        print(line)
    return 1 if any(c.required and not c.ok for c in checks) else 0


def cmd_predict(args: argparse.Namespace) -> int:
    if args.on == "vertex":
        return _predict_on_vertex(args)
    if not args.model:
        raise UserError("hftfx predict needs --model serving/<name> (or a version folder) of a pushed model")
    if args.input or args.output:
        return _predict_file(args)
    from models import serving_contract
    from models.serving import load_serving_model, predict_texts, prediction_lines, split_pairs

    texts = args.texts or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    model_dir, model = load_serving_model(args.model)
    pairs = None
    if len(serving_contract.text_inputs(model)) == 2:  # a sentence-pair model: TEXT<TAB>TEXT_PAIR
        texts, pairs = split_pairs(texts, args.pair_separator, model_dir)
    print(f"model: {model_dir}")
    for line in prediction_lines(predict_texts(model, texts, pairs)):
        print(line)
    return 0


def _predict_file(args: argparse.Namespace) -> int:
    from components.batch_job import BatchInputError, BatchJob, run_batch_prediction

    if not (args.input and args.output) or args.texts:
        raise BatchInputError("batch prediction takes --input and --output together, and no texts as arguments")
    job = BatchJob(
        model=args.model,
        input=args.input,
        output=args.output,
        text_column=args.text_column,
        text_pair_column=args.text_pair_column or "",
        id_columns=tuple(c for c in args.id_columns.split(",") if c) if args.id_columns is not None else None,
        batch_size=args.batch_size,
        beam_args=tuple(args.beam_arg or ()),
    )
    print(run_batch_prediction(job, [f"--runner={configs.LOCAL_BEAM_RUNNER}"]).render())
    return 0


def _predict_on_vertex(args: argparse.Namespace) -> int:
    from pipeline.cloud import submit
    from pipeline.cloud.vertex_batch import submit_batch_prediction

    if not (args.config and args.input and args.output):
        raise UserError("hftfx predict --on vertex needs --config (the cloud profile), --input gs://... and --output")
    config = configs.load_config(args.config, _assignments(args.set, "--set"))
    inputs = [uri for uri in args.input.split(",") if uri]
    job = submit_batch_prediction(
        config, inputs, args.output, submit.default_credentials(), model=args.model or "",
        max_replicas=args.max_replicas,
    )  # fmt: skip
    print(f"batch prediction job {job.resource_name} created; results under {args.output}")
    return 0


def _check_model(config: configs.PipelineConfig) -> None:
    """The run's model checks (tokenizer family, architecture, position limit) before a spec goes to the cloud,
    where they would otherwise fail in the Transform or the Trainer; config and tokenizer files only."""
    from pipeline.orchestration.probe import probe_model

    probe_model(config, weights=False)


def cmd_compile(args: argparse.Namespace) -> int:
    from pipeline.cloud.compiled_specs import default_template
    from pipeline.cloud.kubeflow_v2_runner import compile_pipeline

    config = configs.load_config(args.config, _assignments(args.set, "--set"))
    _check_model(config)
    output = args.output or default_template(args.config)
    spec = compile_pipeline(config, output)
    tasks = spec["root"]["dag"]["tasks"]
    parameters = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    print(f"compiled {len(tasks)} components to {output}; runtime parameters: {sorted(parameters)}")
    return 0


def cmd_function_source(args: argparse.Namespace) -> int:
    from pipeline.retraining.function_source import ENTRY_POINT, MEMORY, write_function_source

    config = configs.load_config(args.config, _assignments(args.set, "--set"))
    _check_model(config)  # as `hftfx compile` does: the folder holds a compiled spec
    written = write_function_source(config, Path(args.output))
    print(f"wrote {args.output}: {', '.join(written)}")
    print(
        f"deploy: gcloud functions deploy {config.pipeline_name}-on-data --gen2 --runtime python313 "
        f"--region {config.cloud.region} --source {args.output} --entry-point {ENTRY_POINT} --memory {MEMORY} "
        f"--trigger-event-filters type=google.cloud.storage.object.v1.finalized "
        f"--trigger-event-filters bucket=BUCKET --service-account {config.cloud.service_account or 'SA_EMAIL'}"
    )
    return 0


def _template(args: argparse.Namespace, config_path: str) -> str:
    """--template, else the committed spec compiled from the config."""
    from pipeline.cloud.compiled_specs import default_template

    return args.template or default_template(config_path)


def cmd_submit(args: argparse.Namespace) -> int:
    from pipeline.cloud import submit

    config = configs.load_config(args.config, _assignments(args.set, "--set"))
    _check_model(config)
    values = run_parameters.values(config, _assignments(args.param, "--param", yaml.safe_load))
    note = None if args.kfp_host else submit.span_caching_note(config, values)
    if note:
        print(note, file=sys.stderr)
    template = _template(args, args.config)
    for line in submit.submit_run(config, template, values, kfp_host=args.kfp_host, dry_run=args.dry_run):
        print(line)
    return 0


def _cloud_context(args: argparse.Namespace, config: configs.PipelineConfig):
    from google.auth.credentials import AnonymousCredentials

    from pipeline.cloud import submit
    from pipeline.retraining.vertex import vertex_clients

    credentials = AnonymousCredentials() if getattr(args, "dry_run", False) else submit.default_credentials()
    return credentials, vertex_clients(config, credentials)


def cmd_trigger(args: argparse.Namespace) -> int:
    """Retrain when a span is new (or has drifted): check, run once, or watch."""
    from pipeline.retraining import local_trigger

    overrides = _overrides(args)
    if args.cloud:
        from pipeline.retraining.vertex import cloud_trigger

        if args.action == "watch":
            raise configs.ConfigError("on Vertex, retrain on storage events or a schedule instead of watching")
        config_path = args.config or "configs/vertex-retraining.yaml"
        config = configs.load_config(config_path, overrides)
        credentials, clients = _cloud_context(args, config)
        result = cloud_trigger(
            config,
            _template(args, config_path),
            clients,
            credentials,
            span=args.span,
            dry_run=args.dry_run or args.action == "check",
            ask_vertex=not args.dry_run,
        )
        for line in result.lines(show_request=args.dry_run and args.action == "run"):
            print(line)
        return 0
    config = configs.load_config(args.config, overrides)
    if args.action == "check":
        for line in local_trigger.check(config, measure_drift=args.drift, span=args.span).lines():
            print(line)
        return 0
    if args.action == "run":
        from pipeline.reporting.report import write_run_report

        result = local_trigger.trigger_run(config, verbose=args.verbose, span=args.span)
        if result.summary is not None:
            print()
            print(result.summary.render())
            print(f"\nreport: {write_run_report(config, result.summary)}")
        return 0
    try:
        runs = local_trigger.watch(config, interval=args.interval, max_polls=args.max_polls, verbose=args.verbose)
    except KeyboardInterrupt:
        print("\n[trigger] watch stopped; an interrupted run is retried by the next trigger")
        return 130
    print(f"[trigger] watch stopped after {args.max_polls} polls; {runs} run(s) started")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    """Past runs from ML Metadata: span, outcome, metrics, blessing, pushed version."""
    from pipeline.reporting.metadata_reader import summarize_all
    from pipeline.reporting.run_summary import render_runs

    config = configs.load_config(args.config, _assignments(args.set, "--set"))
    summaries = summarize_all(config.metadata_sqlite, config.pipeline_name)
    if args.json:
        print(json.dumps([s.to_json() for s in summaries], indent=2))
        return 0
    if not summaries:
        print(f"no runs of '{config.pipeline_name}' in {config.metadata_sqlite}")
        return 0
    print(render_runs(summaries))
    return 0


def cmd_schedule(args: argparse.Namespace) -> int:
    """Vertex PipelineJobSchedules of the compiled pipeline."""
    from pipeline.retraining import vertex

    config = configs.load_config(args.config, _assignments(args.set, "--set"))
    credentials, clients = _cloud_context(args, config)
    lines = vertex.schedule_command(
        config,
        args.action,
        clients,
        credentials,
        template=_template(args, args.config) if args.action == "create" else None,
        cron=args.cron,
        schedule=args.schedule,
        max_concurrent_runs=args.max_concurrent_runs,
        max_runs=args.max_runs,
        dry_run=args.dry_run,
    )
    for line in lines:
        print(line)
    return 0


def _assignments(assignments: list[str] | None, flag: str, parse=str) -> dict:
    """KEY=VALUE flags (--set, --param) as a dict; a malformed one names its flag."""
    values = {}
    for assignment in assignments or []:
        key, sep, value = assignment.partition("=")
        if not sep:
            raise configs.ConfigError(f"{flag} needs KEY=VALUE, got '{assignment}'")
        if value.strip()[:1] in ("[", "{"):  # lists and mappings: YAML flow style (JSON works too)
            try:
                values[key.strip()] = yaml.safe_load(value)
            except yaml.YAMLError as error:
                raise configs.ConfigError(f"{flag} {key.strip()}: '{value}' is not a YAML list or mapping") from error
            continue
        values[key.strip()] = parse(value)
    return values


def cmd_serve(args: argparse.Namespace) -> int:
    from models.prediction_server import serve

    serve(args.model, args.port)
    return 0


def cmd_serve_check(args: argparse.Namespace) -> int:
    from models.serve_check import read_request, serve_check

    return 0 if serve_check(args.model, [read_request(args.request)] if args.request else None) else 1


TEMPLATE_HELP = "the compiled spec (default: the one committed for --config: pipeline.yaml, pipeline-retraining.yaml)"


# Options several commands share, each declared once as an argparse parent parser.
def _config_options(
    default: str | None = None, about: str = "YAML file with config overrides"
) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--config", default=default, help=f"{about} (see pipeline/configs.py)")
    parent.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="any config key, e.g. training.warmup_ratio=0.2"
    )
    return parent


def _run_flag_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    for flag, (_, kind, text) in RUN_FLAGS.items():
        parent.add_argument(flag, type=kind, help=text)
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
    predict.add_argument("--config", help="with --on vertex: the cloud profile (e.g. configs/vertex.yaml)")
    predict.add_argument("--set", action="append", metavar="KEY=VALUE", help="with --on vertex: override a config key")
    predict.add_argument("--max-replicas", type=int, default=4, help="with --on vertex: most machines the job uses")
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
        "serve", help="serve a pushed model over HTTP as a Vertex AI custom container (the image's default command)"
    )
    serve.add_argument("--model", help="a model folder, local or gs:// (default: $AIP_STORAGE_URI, set by Vertex AI)")
    serve.add_argument("--port", type=int, help="default: $AIP_HTTP_PORT, else 8080")
    serve.set_defaults(handler=cmd_serve)


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
    trigger.add_argument("action", choices=["check", "run", "watch"])
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
    unless --verbose (pipeline/console.py)."""
    from pipeline.console import without_startup_chatter

    if "--verbose" in (sys.argv[1:] if argv is None else argv):
        return main(argv)
    with without_startup_chatter():
        return main(argv)


if __name__ == "__main__":
    sys.exit(run_quietly())

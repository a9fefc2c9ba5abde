"""What each `hftfx` command does, given its parsed arguments (the parser is in pipeline/cli/__init__.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from components import run_parameters
from models.errors import UserError
from pipeline.config import pipeline_config
from pipeline.config.reference import run_flags


def flag_dest(flag: str) -> str:
    """argparse's attribute for a flag: --train-limit -> train_limit."""
    return flag.lstrip("-").replace("-", "_")


def overrides_from_flags(args: argparse.Namespace) -> dict:
    overrides = {}
    for run_flag in run_flags():
        value = getattr(args, flag_dest(run_flag.flag))
        if value is not None:
            overrides[run_flag.key] = [v.strip() for v in value.split(",") if v.strip()] if run_flag.is_list else value
    overrides.update(_assignments(args.set, "--set"))
    if args.no_cache:
        overrides["enable_cache"] = False
    return overrides


def cmd_run(args: argparse.Namespace) -> int:
    config = pipeline_config.load_config(args.config, overrides_from_flags(args))  # a typo exits 2 before TF loads
    if args.check:
        return _check_run(config)
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


def _check_run(config: pipeline_config.PipelineConfig) -> int:
    from pipeline.cloud.cost import checked_run_cost
    from pipeline.orchestration.local_runner import check_run

    pipeline, chosen = check_run(config)
    if cost := checked_run_cost(chosen):
        print(f"[pipeline] cost: {cost.describe()}")
    steps = ", ".join(component.id for component in pipeline.components)
    print(f"check passed: config, data sample, labels, model, served contract and the settings of {steps}")
    print("no component ran; run it without --check")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pipeline.reporting.report import write_latest_report

    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
    print(f"report: {write_latest_report(config, args.output or None)}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    if args.cloud:
        return _cloud_doctor(args)
    if args.estimate:
        return _cloud_estimate(args)
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


def _cloud_estimate(args: argparse.Namespace) -> int:
    """`hftfx doctor --estimate`: the Trainer's CustomJob for the profile's whole train split (read as the
    ExampleGen reads it), its placement and workers: time and price."""
    from pipeline.cloud.cost import job_cost
    from pipeline.cloud.profile import validate_cloud
    from pipeline.machine.estimate import training_work

    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
    validate_cloud(config)
    work = training_work(config)
    print(
        f"{work.examples:,} training texts x {work.epochs} epoch(s) of {config.model.name}: "
        f"{work.flops / 1e15:.2f} PFLOP of training"
    )
    print(job_cost(config, work.flops, work.examples, work.epochs).describe())
    return 0


def _cloud_doctor(args: argparse.Namespace) -> int:
    """`hftfx doctor --cloud`: the profile, its spec and credentials, offline; then the IAM roles it needs."""
    from pipeline.cloud.compiled_specs import COMPILED_PROFILES
    from pipeline.cloud.iam import offline_checks, role_lines

    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
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
    if args.log_dir and not args.input:
        raise UserError("--log-dir logs a batch job's answers (--input); `hftfx serve --log-dir` logs a server's")
    precision = _serving_precision(args)  # before TensorFlow loads: bf16 turns its oneDNN ops on
    if args.input or args.output:
        return _predict_file(args, precision)
    from models.serving import tf_serving
    from models.serving.pushed_model import (
        at_precision,
        load_serving_model,
        predict_texts,
        prediction_lines,
        split_pairs,
    )

    texts = args.texts or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    model_dir, model = load_serving_model(args.model)
    precision = at_precision(model, precision)
    pairs = None
    if len(tf_serving.text_inputs(model)) == 2:  # a sentence-pair model: TEXT<TAB>TEXT_PAIR
        texts, pairs = split_pairs(texts, args.pair_separator, model_dir)
    print(f"model: {model_dir}, in {precision.describe()}")
    for line in prediction_lines(predict_texts(model, texts, pairs)):
        print(line)
    return 0


def _predict_file(args: argparse.Namespace, precision) -> int:
    from components.scorer.job import run_batch_prediction
    from components.scorer.records import BatchJob
    from components.scorer.rows import BatchInputError

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
        log=_log_settings(args),
        precision=precision,
    )
    print(run_batch_prediction(job, [f"--runner={pipeline_config.LOCAL_BEAM_RUNNER}"]).render())
    return 0


def _predict_on_vertex(args: argparse.Namespace) -> int:
    from pipeline.cloud import submit
    from pipeline.cloud.vertex_batch import submit_batch_prediction

    if not (args.config and args.input and args.output):
        raise UserError("hftfx predict --on vertex needs --config (the cloud profile), --input gs://... and --output")
    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
    inputs = [uri for uri in args.input.split(",") if uri]
    job = submit_batch_prediction(
        config, inputs, args.output, submit.default_credentials(), model=args.model or "",
        max_replicas=args.max_replicas,
    )  # fmt: skip
    print(f"batch prediction job {job.resource_name} created; results under {args.output}")
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    """End a canary: the endpoint's newest model takes all the traffic, the ones before it are retired."""
    from google.cloud import aiplatform

    from components.pusher.endpoint import promote_newest
    from pipeline.cloud import submit
    from pipeline.cloud.vertex_jobs import api_endpoint, vertex_serving_config

    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
    cloud = config.cloud
    if cloud.push_to != "endpoint":
        raise UserError(f"{args.config} pushes to {cloud.push_to}, not a Vertex endpoint: nothing to promote")
    aiplatform.init(
        project=cloud.project, location=cloud.region, api_endpoint=api_endpoint(cloud), api_transport="grpc",
        credentials=submit.default_credentials(),
    )  # fmt: skip
    promoted, retired = promote_newest(vertex_serving_config(cloud))
    print(f"endpoint {cloud.endpoint_name}: deployed model {promoted} now takes 100% of the traffic", end="")
    print(f"; undeployed {', '.join(retired)}" if retired else "")
    return 0


def _check_model(config: pipeline_config.PipelineConfig) -> None:
    """The run's model checks (tokenizer family, architecture, position limit) before a spec goes to the cloud,
    where they would otherwise fail in the Transform or the Trainer; config and tokenizer files only. Says the
    recipe the model gets (a compiled spec fixes its warm-up and clipping from the same config.json; an auto rate
    is the Trainer's, from its train split)."""
    from models.training.long_and_few import PLATEAU_RATE
    from pipeline.orchestration.choose import resolve_recipe
    from pipeline.orchestration.preflight import check_model

    _, recipe = resolve_recipe(config, check_model(config, weights=False))
    print(f"recipe: {recipe.describe()}", file=sys.stderr)
    if recipe.rate_chosen and recipe.learning_rate > PLATEAU_RATE:
        print(
            f"recipe: the Trainer lowers the learning rate to {PLATEAU_RATE:g} where its train split's texts are "
            "long and few (models/training/long_and_few.py)",
            file=sys.stderr,
        )


def cmd_compile(args: argparse.Namespace) -> int:
    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
    _check_model(config)  # before TFX and kfp load: a refused model costs their imports no more
    from pipeline.cloud.compiled_specs import component_tasks, default_template
    from pipeline.cloud.kubeflow_v2_runner import compile_pipeline

    output = args.output or default_template(args.config)
    spec = compile_pipeline(config, output)
    tasks = component_tasks(spec)
    parameters = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    print(f"compiled {len(tasks)} components to {output}; runtime parameters: {sorted(parameters)}")
    return 0


def cmd_function_source(args: argparse.Namespace) -> int:
    import shlex

    from pipeline.retraining.function_source import deploy_command, write_function_source

    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
    _check_model(config)  # as `hftfx compile` does: the folder holds a compiled spec
    written = write_function_source(config, Path(args.output))
    print(f"wrote {args.output}: {', '.join(written)}")
    print(f"deploy: {shlex.join(deploy_command(config, Path(args.output)))}")
    return 0


def _template(args: argparse.Namespace, config_path: str) -> str:
    """--template, else the committed spec compiled from the config."""
    from pipeline.cloud.compiled_specs import default_template

    return args.template or default_template(config_path)


def cmd_submit(args: argparse.Namespace) -> int:
    from pipeline.cloud import submit

    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
    _check_model(config)
    values = run_parameters.values(config, _assignments(args.param, "--param", yaml.safe_load))
    note = None if args.kfp_host else submit.span_caching_note(config, values)
    if note:
        print(note, file=sys.stderr)
    template = _template(args, args.config)
    for line in submit.submit_run(config, template, values, kfp_host=args.kfp_host, dry_run=args.dry_run):
        print(line)
    return 0


def _cloud_context(args: argparse.Namespace, config: pipeline_config.PipelineConfig):
    from google.auth.credentials import AnonymousCredentials

    from pipeline.cloud import submit
    from pipeline.retraining.vertex import vertex_clients

    credentials = AnonymousCredentials() if getattr(args, "dry_run", False) else submit.default_credentials()
    return credentials, vertex_clients(config, credentials)


def cmd_trigger(args: argparse.Namespace) -> int:
    """Retrain when a span is new (or has drifted): check, run once, or watch."""
    from pipeline.retraining import local_trigger

    overrides = overrides_from_flags(args)
    if args.action == "forget-span":
        return _forget_span(args, overrides)
    if args.cloud:
        from pipeline.retraining.vertex import cloud_trigger

        if args.action == "watch":
            raise pipeline_config.ConfigError("on Vertex, retrain on storage events or a schedule instead of watching")
        config_path = args.config or "configs/vertex-retraining.yaml"
        config = pipeline_config.load_config(config_path, overrides)
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
    config = pipeline_config.load_config(args.config, overrides)
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
    from tensorflow.python.util import deprecation  # TFMA's result reader uses TF's deprecated record iterator

    from pipeline.reporting.metadata_reader import summarize_all
    from pipeline.reporting.run_summary import render_runs

    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
    with deprecation.silence():  # its notice would stand above the table, where it says nothing to the user
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

    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
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
            raise pipeline_config.ConfigError(f"{flag} needs KEY=VALUE, got '{assignment}'")
        if value.strip()[:1] in ("[", "{"):  # lists and mappings: YAML flow style (JSON works too)
            try:
                values[key.strip()] = yaml.safe_load(value)
            except yaml.YAMLError as error:
                raise pipeline_config.ConfigError(
                    f"{flag} {key.strip()}: '{value}' is not a YAML list or mapping"
                ) from error
            continue
        values[key.strip()] = parse(value)
    return values


def _forget_span(args: argparse.Namespace, overrides: dict) -> int:
    """`hftfx trigger forget-span --cloud --span N`: span N's runs cancelled and their records deleted on Vertex."""
    from pipeline.retraining.vertex import forget_span

    if not args.cloud:
        raise pipeline_config.ConfigError(
            "forget-span undoes a storage event's span on Vertex (--cloud); local runs are not started by events"
        )
    if args.span is None:
        raise pipeline_config.ConfigError("forget-span needs --span N: the span whose runs to forget")
    config = pipeline_config.load_config(args.config or "configs/vertex-retraining.yaml", overrides)
    _, clients = _cloud_context(args, config)
    for line in forget_span(config, clients, args.span):
        print(line)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    precision = _serving_precision(args)  # before TensorFlow loads: bf16 turns its oneDNN ops on
    from models.serving.prediction_server import limits_from, serve

    limits = limits_from({
        "max_batch": args.max_batch,
        "batch_wait_s": None if args.batch_wait_ms is None else args.batch_wait_ms / 1e3,
        "max_body_bytes": None if args.max_body_mb is None else int(args.max_body_mb * 1e6),
        "max_instances": args.max_instances,
        "header_timeout_s": args.header_timeout,
        "read_timeout_s": args.read_timeout,
        "write_timeout_s": args.write_timeout,
        "max_requests": args.max_requests_per_connection,
        "max_queued_rows": args.max_queued_rows,
        "max_call_bytes": None if args.max_call_mb is None else int(args.max_call_mb * 1e6),
    })  # fmt: skip
    serve(args.model, args.port, args.host, limits, _log_settings(args), precision)
    return 0


def _serving_precision(args: argparse.Namespace):
    """--precision for this CPU, with the process prepared for it; chosen before TensorFlow is imported."""
    from models.serving.precision import choose_serving_precision, prepare_process

    return prepare_process(choose_serving_precision(args.precision))


def _log_settings(args: argparse.Namespace):
    """The prediction log --config's serving.log_* keys ask for, each --log-* flag given over its key; None
    when no log_dir is set."""
    from models.serving.config import ServingConfig

    given = {key: getattr(args, key) for key in ServingConfig.model_fields}
    flags = {f"serving.{key}": value for key, value in given.items() if value is not None}
    if not (args.config or args.set or flags):  # the defaults log nothing: no config to build at start-up
        return None
    config = pipeline_config.load_config(args.config, {**_assignments(args.set, "--set"), **flags})
    return config.serving.log_settings()


def cmd_monitor(args: argparse.Namespace) -> int:
    import datetime

    from pipeline.cloud.vertex_jobs import notify_topic_path
    from pipeline.monitoring.monitor import MIN_WINDOW_ROWS, monitor, report_path, write_json
    from pipeline.monitoring.monitor_page import write_monitor_page

    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
    bigquery, model, version = args.bigquery, args.model, args.version
    if args.endpoint:
        from pipeline.monitoring.endpoint_source import endpoint_source_of

        source = endpoint_source_of(config)
        bigquery, model, version = source.table, model or source.model_dir, version or source.deployed_model_id
        print(f"endpoint {config.cloud.endpoint_name}: deployed model {version} ({model}), logged to {bigquery}")
    logs = args.logs or (None if bigquery else config.serving.log_dir)
    if not (logs or bigquery):
        raise UserError(
            "hftfx monitor reads --logs DIR (or the config's serving.log_dir), --bigquery TABLE or --endpoint"
        )
    since = None
    if args.since_hours is not None:
        since = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=args.since_hours)
    report = monitor(config, logs, model, version, since, args.min_rows or MIN_WINDOW_ROWS, args.queue, bigquery)
    beside = logs or "."
    for line in report.lines():
        print(line)
    now = datetime.datetime.now(datetime.UTC)
    written = write_json(report, args.json or report_path(f"{beside}/monitor", report.version, now))
    print(f"written: {written}; its folder's windows: {write_monitor_page(written.parent)}")
    if args.queue:
        from pipeline.monitoring.labeling_queue import CONFIG_FILE, write_queue

        where = args.queue_file or report_path(f"{beside}/labeling", report.version, now)
        queue = write_queue(where, list(report.queue), report.label_names)
        print(f"labeling queue: {len(report.queue)} texts in {queue} (Label Studio tasks; its config: {CONFIG_FILE})")
    topic = args.notify or notify_topic_path(config.cloud)
    if report.moved and topic and topic != "none":
        from components.notifier.component import publish

        try:
            print(f"notified {topic} (message {publish(topic, report)})")
        except Exception as error:  # the report is written: say why nobody was told, in one line
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            print(f"hftfx: drift found and written, but {topic} was not told: {reason}", file=sys.stderr)
            return 1
    return 0


def cmd_label(args: argparse.Namespace) -> int:
    from pipeline.monitoring.label_import import import_labels

    config = pipeline_config.load_config(args.config, _assignments(args.set, "--set"))
    span, path, rows, unlabeled = import_labels(config, args.file, args.span)
    left = f" ({unlabeled} tasks without a label left out)" if unlabeled else ""
    print(f"span {span}: {rows} labeled texts in {path}{left}; `hftfx trigger run` trains on it")
    return 0


def cmd_serve_check(args: argparse.Namespace) -> int:
    from models.serving.serve_check import read_request, serve_check

    return 0 if serve_check(args.model, [read_request(args.request)] if args.request else None) else 1

"""Label Studio's own SDK on what `hftfx monitor --queue` writes: run by the reference environment's Python
(bin/reference-env), never imported by the project, which does not install it.

  python tests/label_studio_reference.py check CONFIG TASKS          the config's and each task's problems as a JSON
                                                                    list, by the SDK's parser ([] when it accepts)
  python tests/label_studio_reference.py export CONFIG TASKS < labels  Label Studio's JSON export of the tasks once
                                                                    labeled (a label or null each), its regions made
                                                                    by the SDK's own control
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from label_studio_sdk.label_interface import LabelInterface


def check(interface: LabelInterface, tasks: list[dict]) -> list[str]:
    problems = []
    try:
        interface.validate()
    except Exception as error:  # the SDK's validation errors have no public common base
        problems.append(f"config: {error}")
    for i, task in enumerate(tasks):
        for obj in interface.objects:
            if obj.value_is_variable and task["data"].get(obj.value_name) is None:
                problems.append(f"task {i}: no data.{obj.value_name}")
        for prediction in task.get("predictions", []):
            problems.extend(f"task {i}: {error}" for error in interface.validate_prediction(prediction, True))
    return problems


def export(interface: LabelInterface, tasks: list[dict], labels: list[str | None]) -> list[dict]:
    control = next(iter(interface.controls))
    exported = []
    for i, (task, label) in enumerate(zip(tasks, labels, strict=True)):
        result = [] if label is None else [json.loads(control.label(label).to_json())]
        annotations = [{"id": i, "result": result, "was_cancelled": False}] if result else []
        exported.append({"id": i, **task, "annotations": annotations})
    return exported


def main(command: str, config: str, tasks: str) -> None:
    interface = LabelInterface(Path(config).read_text())
    queued = json.loads(Path(tasks).read_text())
    if command == "check":
        print(json.dumps(check(interface, queued)))
    elif command == "export":
        print(json.dumps(export(interface, queued, json.load(sys.stdin))))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(*sys.argv[1:])

"""Turn an upstream CRD into the schema file the deploy tests validate against:
``python tests/deploy_schemas/trim_crd.py CRD.yaml VERSION OUT.json``.

Keeps one version's ``openAPIV3Schema`` without its descriptions, and puts in place of every
embedded PodSpec (an object with ``containers`` and ``volumes``) a stand-in that takes any
object: the tests validate those templates as PodSpecs with kubernetes-validate, whose
schemas are the Kubernetes ones.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

POD_SPEC = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "x-pod-spec": True}


def trim(node: Any) -> Any:
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict) and {"containers", "volumes"} <= set(props):
            return POD_SPEC
        return {k: trim(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [trim(v) for v in node]
    return node


def main(crd: str, version: str, out: str) -> None:
    doc = yaml.safe_load(Path(crd).read_text())
    [found] = [v for v in doc["spec"]["versions"] if v["name"] == version]
    schema = {
        "group": doc["spec"]["group"],
        "kind": doc["spec"]["names"]["kind"],
        "version": version,
        "schema": trim(found["schema"]["openAPIV3Schema"]),
    }
    Path(out).write_text(json.dumps(schema, sort_keys=True, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])

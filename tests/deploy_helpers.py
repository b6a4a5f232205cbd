"""The deployment tests' helpers: a renderer for the small part of kustomize the deploy/ files
use (``resources``, ``components`` and RFC 6902 patches; beyond it, it fails rather than
guess), and reading a container's env."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

# ---- rendering ---------------------------------------------------------------------------


def load_yaml(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def load_one(path: Path) -> Any:
    [doc] = load_yaml(path)
    return doc


def api_group_version(obj: dict[str, Any]) -> tuple[str, str]:
    group, _, version = obj["apiVersion"].rpartition("/")
    return group, version


def matches(target: dict[str, Any], obj: dict[str, Any]) -> bool:
    group, version = api_group_version(obj)
    found = {"group": group, "version": version, "kind": obj["kind"]}
    found["name"] = obj["metadata"]["name"]
    unknown = set(target) - set(found)
    assert not unknown, f"patch target fields this renderer does not know: {unknown}"
    return all(found[key] == value for key, value in target.items())


def json_patch(obj: Any, operations: list[dict[str, Any]]) -> None:
    """RFC 6902 ``add`` and ``replace`` (all these files use), in place."""
    for operation in operations:
        op, path = operation["op"], operation["path"]
        assert op in ("add", "replace"), f"JSON patch op {op!r} not implemented here"
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
        node = obj
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        value = copy.deepcopy(operation["value"])
        if isinstance(node, list):
            if last == "-":
                node.append(value)
            elif op == "add":
                node.insert(int(last), value)
            else:
                node[int(last)] = value
        else:
            assert op == "add" or last in node, f"replace of missing {path}"
            node[last] = value


def apply_patches(directory: Path, patches: list[dict[str, Any]], objects: list[Any]) -> None:
    for patch in patches:
        assert set(patch) <= {"path", "patch", "target"}, f"patch fields: {sorted(patch)}"
        text = (directory / patch["path"]).read_text() if "path" in patch else patch["patch"]
        operations = yaml.safe_load(text)
        assert isinstance(operations, list), "only JSON (RFC 6902) patches are implemented"
        hits = [obj for obj in objects if matches(patch["target"], obj)]
        assert hits, f"patch in {directory} matches no object: {patch['target']}"
        for obj in hits:
            json_patch(obj, operations)


def kustomize_build(directory: Path, kind: str = "Kustomization") -> list[Any]:
    """What ``kustomize build directory`` gives, for the fields these files use. Any other
    field fails here, so that the tests never check something kustomize would render
    differently."""
    spec = load_one(directory / "kustomization.yaml")
    assert spec["kind"] == kind, f"{directory}: a {spec['kind']}, expected a {kind}"
    known = {"apiVersion", "kind", "resources", "components", "patches"}
    assert set(spec) <= known, f"{directory}: not implemented here: {set(spec) - known}"
    objects: list[Any] = []
    for entry in spec.get("resources", []):
        path = directory / entry
        objects += kustomize_build(path) if path.is_dir() else load_yaml(path)
    for entry in spec.get("components", []):
        component = directory / entry
        objects += kustomize_build_component(component, objects)
    apply_patches(directory, spec.get("patches", []), objects)
    ids = [(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(ids) == len(set(ids)), f"{directory}: an object is defined twice: {ids}"
    return objects


def kustomize_build_component(directory: Path, objects: list[Any]) -> list[Any]:
    """A Component's own resources; its patches apply to everything built so far."""
    spec = load_one(directory / "kustomization.yaml")
    assert spec["kind"] == "Component", f"{directory}: not a Component"
    assert set(spec) <= {"apiVersion", "kind", "resources", "patches"}, sorted(spec)
    added = [doc for entry in spec.get("resources", []) for doc in load_yaml(directory / entry)]
    apply_patches(directory, spec.get("patches", []), [*objects, *added])
    return added


def by_kind(objects: list[Any], kind: str) -> dict[str, Any]:
    [obj] = [o for o in objects if o["kind"] == kind]
    return obj


def plain_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def secret_refs(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }


def cpu_cores(quantity: str | int) -> float:
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)

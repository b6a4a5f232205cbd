"""The deployment files (deploy/): valid Kubernetes objects, and consistent with the server.

- The kustomizations are rendered here with PyYAML (``kustomize_build`` in deploy_helpers.py):
  kustomize is a Go binary, and these files use only a small part of it (``resources``,
  ``components`` and RFC 6902 patches), which the renderer implements and beyond which it
  fails rather than guess.
- Every rendered object, and the Secret example, is validated with ``kubernetes-validate``
  against the Kubernetes JSON schemas it ships (offline), in strict mode (an unknown field
  fails), for the oldest version the files claim (1.30: the preStop ``sleep`` action) and the
  newest it knows.
- No Knative schema is available offline: the Cloud Run service's pod template is validated as
  a Kubernetes ``PodTemplate`` once its Knative-only fields are taken out, and those fields, and
  Cloud Run's limits, are checked by hand.
- Consistency with the server: every environment variable is a real setting with a valid value
  (loaded through ``Settings`` as the server would), the probe paths answer without the API
  key (503 "loading" before the model is up), the ports agree, and shutdown fits in the grace
  period.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_validate.utils import ValidationError, validate

from config.settings import REPO_ROOT, Settings, env_names
from tests.conftest import make_client
from tests.deploy_helpers import (
    by_kind,
    cpu_cores,
    kustomize_build,
    load_one,
    plain_env,
    secret_refs,
)

pytestmark = pytest.mark.unit

DEPLOY = REPO_ROOT / "deploy"
BASE = DEPLOY / "kubernetes" / "base"
QUEUE_OVERLAY = DEPLOY / "kubernetes" / "overlays" / "queue-autoscaling"
QUEUE_COMPONENT = DEPLOY / "kubernetes" / "components" / "queue-autoscaling"
AFFINITY_OVERLAY = DEPLOY / "kubernetes" / "overlays" / "session-affinity"
CLOUD_RUN = DEPLOY / "cloudrun" / "service.yaml"
SECRET_EXAMPLE = BASE / "secret.example.yaml"

# The oldest Kubernetes the manifests claim (preStop `sleep` is on by default from 1.30) and
# the newest kubernetes-validate ships schemas for.
K8S_VERSIONS = ("1.30", "1.37")
API_KEY = "test-key"
NAME = "onnx-genai-server"
CLOUD_RUN_STARTUP_LIMIT_S = 240  # Cloud Run refuses a longer startup probe window
CLOUD_RUN_SIGTERM_GRACE_S = 10  # Cloud Run's SIGTERM-to-SIGKILL time


@pytest.fixture(scope="module")
def base() -> list[Any]:
    return kustomize_build(BASE)


@pytest.fixture(scope="module")
def deployment(base: list[Any]) -> dict[str, Any]:
    return by_kind(base, "Deployment")


@pytest.fixture(scope="module")
def container(deployment: dict[str, Any]) -> dict[str, Any]:
    [server] = deployment["spec"]["template"]["spec"]["containers"]
    return server


@pytest.fixture(scope="module")
def knative() -> dict[str, Any]:
    return load_one(CLOUD_RUN)


@pytest.fixture(scope="module")
def run_container(knative: dict[str, Any]) -> dict[str, Any]:
    [server] = knative["spec"]["template"]["spec"]["containers"]
    return server


# ---- schema validation ---------------------------------------------------------------------


def all_manifests() -> list[Any]:
    return list(_manifests())


def _manifests() -> Iterator[Any]:
    base = kustomize_build(BASE)
    for obj in base:
        yield pytest.param(obj, id=f"base-{obj['kind']}")
    for overlay in (QUEUE_OVERLAY, AFFINITY_OVERLAY):
        for obj in kustomize_build(overlay):
            if obj not in base:  # what the component changed
                yield pytest.param(obj, id=f"{overlay.name}-{obj['kind']}")
    yield pytest.param(load_one(SECRET_EXAMPLE), id="secret-example")


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("obj", all_manifests())
def test_manifest_validates_against_the_kubernetes_schema(obj: Any, version: str) -> None:
    validate(obj, version, strict=True)


def test_validation_is_strict(deployment: dict[str, Any]) -> None:
    """The check above would catch a misspelt field (its schemas refuse unknown fields)."""
    wrong = copy.deepcopy(deployment)
    wrong["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(ValidationError):
        validate(wrong, K8S_VERSIONS[-1], strict=True)


def test_kustomize_renderer_refuses_what_it_does_not_implement(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: x-\n"
    )
    with pytest.raises(AssertionError, match="namePrefix"):
        kustomize_build(tmp_path)


# ---- the base: consistent with the server ---------------------------------------------------


@pytest.fixture()
def deployed_settings(container: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings the server reads from the Deployment's environment (the key: a stand-in)."""
    for name, value in plain_env(container).items():
        monkeypatch.setenv(name, value)
    for name in secret_refs(container):
        monkeypatch.setenv(name, API_KEY)
    return Settings.load()


def test_every_env_var_is_a_setting(container: dict[str, Any], run_container: dict) -> None:
    known = set(env_names())
    for c in (container, run_container):
        names = [e["name"] for e in c["env"]]
        assert len(names) == len(set(names)), f"an env var is set twice: {names}"
        assert set(names) <= known, f"not settings: {set(names) - known}"


def test_env_values_are_valid_settings(
    deployed_settings: Settings, container: dict[str, Any]
) -> None:
    server, model = deployed_settings.server, deployed_settings.model
    assert server.host == "0.0.0.0"
    assert server.workers == 1, "scale with replicas: the drain on SIGTERM is one worker's"
    assert server.api_keys == [API_KEY]
    limit = cpu_cores(container["resources"]["limits"]["cpu"])
    assert model.intra_op_threads == limit, "GENAI_INTRA_OP_THREADS must match the CPU limit"


def test_ports_agree(
    deployed_settings: Settings, deployment: dict[str, Any], base: list[Any]
) -> None:
    [server] = deployment["spec"]["template"]["spec"]["containers"]
    [port] = server["ports"]
    assert port["containerPort"] == deployed_settings.server.port
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == port["containerPort"]
    [service_port] = by_kind(base, "Service")["spec"]["ports"]
    assert service_port["targetPort"] in (port["name"], port["containerPort"])
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert server[probe]["httpGet"]["port"] in (port["name"], port["containerPort"])


def test_probe_paths_answer_without_the_key(
    deployed_settings: Settings, container: dict[str, Any]
) -> None:
    """Probes send no key: their paths must be open, and answer 503 "loading" until the model
    is up (the app here is built, not started: its model is not loaded)."""
    client = make_client()
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        response = client.get(container[probe]["httpGet"]["path"])
        assert response.status_code == 503, (probe, response.text)
        assert response.json()["status"] == "loading"
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_metrics_path_exists_and_needs_the_key(
    deployed_settings: Settings, deployment: dict[str, Any]
) -> None:
    path = deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"]
    client = make_client()
    assert client.get(path).status_code == 401  # hence docs/deployment.md's scrape job with the key
    response = client.get(path, headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status_code == 200
    assert "genai_requests_waiting" in response.text


def test_startup_probe_covers_model_load(container: dict[str, Any]) -> None:
    probe = container["startupProbe"]
    assert probe["failureThreshold"] * probe["periodSeconds"] >= 120
    assert probe["timeoutSeconds"] < probe["periodSeconds"]


def test_shutdown_fits_in_the_grace_period(
    deployed_settings: Settings, deployment: dict[str, Any], container: dict[str, Any]
) -> None:
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    shutdown = deployed_settings.server.shutdown_timeout
    assert grace > shutdown
    assert grace >= shutdown + pre_stop + 5, "leave the process time to exit after draining"


def dockerfile_user() -> tuple[int, str]:
    text = (REPO_ROOT / "Dockerfile").read_text()
    found = re.search(r"useradd\b[^\n]*?(?:--uid|-u)\s+(\d+)[^\n]*?\s(\w+)\s*(?:&&|$)", text, re.M)
    assert found, "the Dockerfile's useradd line (uid and name) was not found"
    return int(found[1]), found[2]


def test_runs_as_the_dockerfiles_non_root_user(
    deployment: dict[str, Any], container: dict[str, Any]
) -> None:
    pod = deployment["spec"]["template"]["spec"]["securityContext"]
    uid, _ = dockerfile_user()
    assert pod["runAsNonRoot"] is True
    assert pod["runAsUser"] == uid != 0
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    own = container["securityContext"]
    assert own["allowPrivilegeEscalation"] is False
    assert own["readOnlyRootFilesystem"] is True
    assert own["capabilities"] == {"drop": ["ALL"]}


def test_what_the_server_writes_is_on_an_emptydir(
    deployed_settings: Settings, deployment: dict[str, Any], container: dict[str, Any]
) -> None:
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    empty_dirs = {v["name"] for v in volumes if "emptyDir" in v}
    mounted = {Path(m["mountPath"]) for m in container["volumeMounts"] if m["name"] in empty_dirs}
    _, user = dockerfile_user()
    profiles = deployed_settings.server.profile_dir
    assert profiles.is_absolute(), "a relative GENAI_PROFILE_DIR lands on the read-only root"
    for path in (profiles, Path("/tmp"), Path(f"/home/{user}/.cache")):
        assert any(path == m or m in path.parents for m in mounted), f"{path} is not writable"


def test_api_key_comes_from_the_secret(container: dict[str, Any], base: list[Any]) -> None:
    ref = secret_refs(container)["GENAI_API_KEY"]
    example = load_one(SECRET_EXAMPLE)
    assert ref["name"] == example["metadata"]["name"]
    assert ref.get("optional") is not True, "no Secret must not mean no authentication"
    assert example["stringData"] == {ref["key"]: ""}, "the example holds no key"
    assert not [o for o in base if o["kind"] == "Secret"], "applying must not reset the key"


def test_selectors_and_targets_agree(deployment: dict[str, Any], base: list[Any]) -> None:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    selectors = [
        deployment["spec"]["selector"]["matchLabels"],
        by_kind(base, "Service")["spec"]["selector"],
        by_kind(base, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
    ]
    for selector in selectors:
        assert selector.items() <= labels.items()
    target = by_kind(base, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])


def test_queue_autoscaling_adds_the_waiting_metric() -> None:
    hpa = by_kind(kustomize_build(QUEUE_OVERLAY), "HorizontalPodAutoscaler")
    kinds = [m["type"] for m in hpa["spec"]["metrics"]]
    assert kinds == ["Resource", "Pods"], "CPU stays, the queue is added"
    metric = hpa["spec"]["metrics"][1]["pods"]["metric"]["name"]
    assert metric == "genai_requests_waiting"
    values = load_one(QUEUE_COMPONENT / "prometheus-adapter-values.yaml")
    [rule] = values["rules"]["custom"]
    assert rule["name"]["as"] == metric
    assert rule["seriesQuery"].startswith(f"{metric}{{")
    assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}
    assert "<<.LabelMatchers>>" in rule["metricsQuery"]
    assert "<<.GroupBy>>" in rule["metricsQuery"]


def test_session_affinity_keeps_a_client_on_one_replica(base: list[Any]) -> None:
    rendered = kustomize_build(AFFINITY_OVERLAY)
    changed = [o for o in rendered if o not in base]
    assert [o["kind"] for o in changed] == ["Service"], "only the Service changes"
    spec = changed[0]["spec"]
    assert spec["sessionAffinity"] == "ClientIP"
    # At least an hour between chained turns, within Kubernetes' maximum.
    assert 3600 <= spec["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"] <= 86400


# ---- Cloud Run ------------------------------------------------------------------------------

KNATIVE_SPEC_ONLY = {"containerConcurrency", "timeoutSeconds"}
CLOUD_RUN_ANNOTATIONS = {
    "autoscaling.knative.dev/minScale",
    "autoscaling.knative.dev/maxScale",
    "run.googleapis.com/cpu-throttling",
    "run.googleapis.com/startup-cpu-boost",
    "run.googleapis.com/execution-environment",
    "run.googleapis.com/sessionAffinity",
}


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_cloud_run_pod_template_validates_as_kubernetes(
    knative: dict[str, Any], version: str
) -> None:
    template = copy.deepcopy(knative["spec"]["template"])
    for field in KNATIVE_SPEC_ONLY:
        template["spec"].pop(field)
    pod_template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": knative["metadata"]["name"]},
        "template": template,
    }
    validate(pod_template, version, strict=True)


def test_cloud_run_knative_fields(knative: dict[str, Any], run_container: dict) -> None:
    assert (knative["apiVersion"], knative["kind"]) == ("serving.knative.dev/v1", "Service")
    assert set(knative) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(knative["spec"]) <= {"template", "traffic"}
    assert knative["spec"]["traffic"] == [{"latestRevision": True, "percent": 100}]
    template = knative["spec"]["template"]
    assert set(template) == {"metadata", "spec"}
    annotations = template["metadata"]["annotations"]
    assert set(annotations) <= CLOUD_RUN_ANNOTATIONS
    assert all(isinstance(v, str) for v in annotations.values())
    low = int(annotations["autoscaling.knative.dev/minScale"])
    high = int(annotations["autoscaling.knative.dev/maxScale"])
    assert 0 <= low <= high
    assert annotations["run.googleapis.com/cpu-throttling"] == "false"
    assert annotations["run.googleapis.com/sessionAffinity"] == "true"
    spec = template["spec"]
    assert 1 <= spec["timeoutSeconds"] <= 3600
    assert run_container["resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}
    [port] = run_container["ports"]
    assert port["name"] in ("http1", "h2c")


@pytest.fixture()
def run_settings(run_container: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """What the server reads on Cloud Run, which sets PORT to the container port."""
    for name, value in plain_env(run_container).items():
        monkeypatch.setenv(name, value)
    for name in secret_refs(run_container):
        monkeypatch.setenv(name, API_KEY)
    [port] = run_container["ports"]
    monkeypatch.setenv("PORT", str(port["containerPort"]))
    return Settings.load()


def test_cloud_run_matches_the_server(
    knative: dict[str, Any], run_container: dict[str, Any], run_settings: Settings
) -> None:
    server = run_settings.server
    spec = knative["spec"]["template"]["spec"]
    assert spec["containerConcurrency"] == server.max_concurrency
    assert "PORT" not in plain_env(run_container), "PORT is Cloud Run's to set"
    [port] = run_container["ports"]
    assert port["containerPort"] == server.port == 8002
    assert server.host == "0.0.0.0"
    assert server.api_keys == [API_KEY]
    assert server.shutdown_timeout < CLOUD_RUN_SIGTERM_GRACE_S
    limit = cpu_cores(run_container["resources"]["limits"]["cpu"])
    assert run_settings.model.intra_op_threads == limit
    probe = run_container["startupProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": port["containerPort"]}
    assert probe["failureThreshold"] * probe["periodSeconds"] <= CLOUD_RUN_STARTUP_LIMIT_S
    assert run_container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_readme_names_the_files() -> None:
    readme = (REPO_ROOT / "docs" / "deployment.md").read_text()
    for heading, path in (("## Kubernetes", "deploy/kubernetes/base"), ("## Cloud Run", CLOUD_RUN)):
        assert heading in readme
        relative = path if isinstance(path, str) else str(path.relative_to(REPO_ROOT))
        assert relative in readme

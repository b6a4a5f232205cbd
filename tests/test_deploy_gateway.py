"""The inference gateway's deployment files: the InferencePool overlays (approximate and precise
prefix routing), the endpoint picker's configurations and KServe's LLMInferenceService.

Validated offline, as tests/test_deploy.py validates the base: every Kubernetes object with
kubernetes-validate (strict), the InferencePool and the LLMInferenceService against their CRDs'
schemas (tests/deploy_schemas, strict as well: an unknown field fails), their PodSpecs as
PodSpecs, and the picker's configurations against its config type, its registered plugins and
their parameters, and its loader's rules. Then consistency with the server: the settings the
pods get are real and valid, the ports, names, block size and topic agree, and what the picker
reads without a key answers without one."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from kubernetes_validate.utils import validate

from backends.types import KV_BLOCK_TOKENS
from config.settings import REPO_ROOT, Settings, env_names
from tests.conftest import make_client
from tests.deploy_helpers import by_kind, kustomize_build, load_one, plain_env

pytestmark = pytest.mark.unit

KUBE = REPO_ROOT / "deploy" / "kubernetes"
APPROXIMATE = KUBE / "overlays" / "inference-pool"
PRECISE = KUBE / "overlays" / "inference-pool-precise"
KSERVE = REPO_ROOT / "deploy" / "kserve" / "llminferenceservice.yaml"
SCHEMAS = REPO_ROOT / "tests" / "deploy_schemas"
K8S_VERSIONS = ("1.30", "1.37")
CRDS = {
    ("inference.networking.k8s.io/v1", "InferencePool"): "inferencepool-v1.json",
    ("serving.kserve.io/v1alpha2", "LLMInferenceService"): "llminferenceservice-v1alpha2.json",
}
PICKER = json.loads((SCHEMAS / "endpoint-picker.json").read_text())


def strict(schema: Any) -> Any:
    """The schema with every object closed to fields it does not name (as kubeconform's strict
    mode; the API server would prune them silently)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_schema(obj: dict[str, Any]) -> dict[str, Any]:
    data = json.loads((SCHEMAS / CRDS[(obj["apiVersion"], obj["kind"])]).read_text())
    found: dict[str, Any] = strict(data["schema"])
    return found


def pod_specs(schema: Any, obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """The PodSpecs ``obj`` holds where ``schema`` has a PodSpec stand-in."""
    if not isinstance(schema, dict) or obj is None:
        return
    if schema.get("x-pod-spec"):
        yield path, obj
        return
    for key, sub in schema.get("properties", {}).items():
        if isinstance(obj, dict) and key in obj:
            yield from pod_specs(sub, obj[key], f"{path}.{key}")


def validate_custom(obj: dict[str, Any], version: str) -> None:
    schema = crd_schema(obj)
    jsonschema.validate(obj, schema)
    for _, spec in pod_specs(schema, obj):
        template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": obj["metadata"]["name"]},
            "template": {"spec": spec},
        }
        validate(template, version, strict=True)


def rendered(overlay: Path) -> list[Any]:
    return kustomize_build(overlay)


def objects() -> Iterator[Any]:
    base = kustomize_build(KUBE / "base")
    for overlay in (APPROXIMATE, PRECISE):
        for obj in rendered(overlay):
            if obj not in base:
                yield pytest.param(
                    obj, id=f"{overlay.name}-{obj['kind']}-{obj['metadata']['name']}"
                )
    yield pytest.param(load_one(KSERVE), id="kserve-LLMInferenceService")


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("obj", list(objects()))
def test_every_object_validates(obj: dict[str, Any], version: str) -> None:
    if (obj["apiVersion"], obj["kind"]) in CRDS:
        validate_custom(obj, version)
    else:
        validate(obj, version, strict=True)


def test_the_crd_checks_are_strict_and_reach_the_pod_specs() -> None:
    pool = by_kind(rendered(APPROXIMATE), "InferencePool")
    wrong = copy.deepcopy(pool)
    wrong["spec"]["targetPort"] = 8002  # misspelt
    with pytest.raises(jsonschema.ValidationError):
        validate_custom(wrong, K8S_VERSIONS[-1])
    service = copy.deepcopy(load_one(KSERVE))
    service["spec"]["template"]["containers"][0]["readinessProbe"]["httpGett"] = {}
    with pytest.raises(Exception, match="httpGett"):
        validate_custom(service, K8S_VERSIONS[-1])


# ---- the endpoint picker's configurations ----------------------------------------------------


def picker_configs() -> dict[str, dict[str, Any]]:
    config_map = by_kind(rendered(APPROXIMATE), "ConfigMap")
    found = {name: yaml.safe_load(text) for name, text in config_map["data"].items()}
    found["kserve-inline"] = load_one(KSERVE)["spec"]["router"]["scheduler"]["config"]["inline"]
    return found


def check_parameters(given: Any, known: Any, where: str) -> None:
    if known is None:
        return  # a value, or a structure this file does not describe
    assert isinstance(given, dict), f"{where}: expected an object"
    unknown = set(given) - set(known)
    assert not unknown, f"{where}: unknown parameters {sorted(unknown)}"
    for key, value in given.items():
        check_parameters(value, known[key], f"{where}.{key}")


def check_picker_config(config: dict[str, Any]) -> None:
    """What the picker's loader checks, and what our configurations rely on."""
    assert config["apiVersion"] in PICKER["apiVersions"] and config["kind"] == PICKER["kind"]
    assert set(config) <= set(PICKER["fields"]), sorted(set(config) - set(PICKER["fields"]))
    names = [p.get("name", p["type"]) for p in config["plugins"]]
    assert len(names) == len(set(names)), f"duplicate plugin names: {names}"
    for plugin in config["plugins"]:
        assert set(plugin) <= {"name", "type", "parameters"}, plugin
        assert plugin["type"] in PICKER["plugins"], f"not a registered plugin: {plugin['type']}"
        known = PICKER["plugins"][plugin["type"]]["parameters"]
        check_parameters(plugin.get("parameters", {}), known, plugin["type"])
    for profile in config["schedulingProfiles"]:
        for ref in profile["plugins"]:
            assert set(ref) <= {"pluginRef", "weight"} and ref["pluginRef"] in names, ref
    layer = config.get("dataLayer", {})
    assert set(layer) <= set(PICKER["dataLayerFields"])
    for source in layer.get("sources", []):
        assert source["pluginRef"] in names
        assert all(e["pluginRef"] in names for e in source["extractors"])


def kinds(config: dict[str, Any]) -> dict[str, str]:
    return {p.get("name", p["type"]): p["type"] for p in config["plugins"]}


@pytest.mark.parametrize("name", ["approximate.yaml", "precise.yaml", "kserve-inline"])
def test_each_picker_config_is_valid_and_scores_by_queue_kv_and_prefix(name: str) -> None:
    config = picker_configs()[name]
    check_picker_config(config)
    by_name = kinds(config)
    [profile] = config["schedulingProfiles"]
    scorers = {by_name[r["pluginRef"]]: r.get("weight") for r in profile["plugins"]}
    assert {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"} <= set(scorers)
    assert all(w and w > 0 for t, w in scorers.items() if t.endswith("-scorer"))
    assert "max-score-picker" in scorers
    prefix = next(p for p in config["plugins"] if p["type"] == "prefix-cache-scorer")
    producer = prefix["parameters"]["prefixMatchInfoProducerName"]
    expected = "precise" if name == "precise.yaml" else "approx"
    assert by_name[producer] == f"{expected}-prefix-cache-producer"
    # The picker reads the server's gauges through the core metrics extractor, vLLM's names.
    sources = config["dataLayer"]["sources"]
    assert {"metrics-data-source": ["core-metrics-extractor"]}.items() <= {
        by_name[s["pluginRef"]]: [by_name[e["pluginRef"]] for e in s["extractors"]] for s in sources
    }.items()


def test_the_config_check_catches_an_unknown_plugin_or_parameter() -> None:
    config = picker_configs()["precise.yaml"]
    misspelt = copy.deepcopy(config)
    misspelt["plugins"].append({"type": "queue-scorrer"})
    unknown = copy.deepcopy(config)
    [producer] = [p for p in unknown["plugins"] if p["type"] == "precise-prefix-cache-producer"]
    producer["parameters"]["kvEventsConfig"]["topic"] = "kv@"
    dangling = copy.deepcopy(config)
    dangling["schedulingProfiles"][0]["plugins"].append({"pluginRef": "nope"})
    for wrong in (misspelt, unknown, dangling):
        with pytest.raises(AssertionError):
            check_picker_config(wrong)


# ---- consistency with the server -----------------------------------------------------------


def server_container(objs: list[Any]) -> dict[str, Any]:
    deployment = next(o for o in objs if o["metadata"]["name"] == "onnx-genai-server")
    [server] = deployment["spec"]["template"]["spec"]["containers"]
    return server


def picker_deployment(objs: list[Any]) -> dict[str, Any]:
    return next(
        o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-epp")
    )


def settings_of(container: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """What the server reads from the container's environment (the key and the downward API's
    values: stand-ins)."""
    for entry in container["env"]:
        value = entry.get("value")
        if value is None:
            source = entry["valueFrom"]
            value = "10.1.2.3" if "fieldRef" in source else "test-key"
        monkeypatch.setenv(entry["name"], value)
    return Settings.load()


@pytest.mark.parametrize("overlay", [APPROXIMATE, PRECISE], ids=["approximate", "precise"])
def test_the_pool_the_picker_and_the_server_agree(
    overlay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs = rendered(overlay)
    pool = by_kind(objs, "InferencePool")
    server = server_container(objs)
    names = [e["name"] for e in server["env"]]
    assert len(names) == len(set(names)) and set(names) <= set(env_names())
    settings = settings_of(server, monkeypatch).server
    assert settings.metrics_open, "the picker scrapes /metrics with no key"
    deployment = next(o for o in objs if o["metadata"]["name"] == "onnx-genai-server")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pool["spec"]["selector"]["matchLabels"].items() <= labels.items()
    http = next(p for p in server["ports"] if p["name"] == "http")
    assert [p["number"] for p in pool["spec"]["targetPorts"]] == [http["containerPort"]]
    assert http["containerPort"] == settings.port
    # The pool's picker is the Service in front of the picker's gRPC port.
    picker = picker_deployment(objs)
    services = [o for o in objs if o["kind"] == "Service"]
    ref = pool["spec"]["endpointPickerRef"]
    [service] = [s for s in services if s["metadata"]["name"] == ref["name"]]
    assert (
        service["spec"]["selector"].items()
        <= picker["spec"]["template"]["metadata"]["labels"].items()
    )
    [port] = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]["number"]]
    [epp] = picker["spec"]["template"]["spec"]["containers"]
    args = dict(zip(epp["args"][::2], epp["args"][1::2], strict=True))
    assert {a.removeprefix("--") for a in args} <= set(PICKER["flags"])
    ports = {p["name"]: p["containerPort"] for p in epp["ports"]}
    assert ports[port["targetPort"]] == int(args["--grpc-port"])
    assert args["--pool-name"] == pool["metadata"]["name"]
    # The config file it reads is a key of the ConfigMap mounted where it looks.
    [mount] = epp["volumeMounts"]
    config_map = by_kind(objs, "ConfigMap")
    [volume] = picker["spec"]["template"]["spec"]["volumes"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    config_file = Path(args["--config-file"])
    assert config_file.parent == Path(mount["mountPath"]) and config_file.name in config_map["data"]
    expected = "precise.yaml" if overlay == PRECISE else "approximate.yaml"
    assert config_file.name == expected


def test_precise_routing_reads_what_the_server_publishes(monkeypatch: pytest.MonkeyPatch) -> None:
    objs = rendered(PRECISE)
    server = server_container(objs)
    settings = settings_of(server, monkeypatch)
    config = yaml.safe_load(by_kind(objs, "ConfigMap")["data"]["precise.yaml"])
    plugins = {p["type"]: p.get("parameters", {}) for p in config["plugins"]}
    producer = plugins["precise-prefix-cache-producer"]
    # Blocks of the server's size; each pod's events on the port it publishes them.
    assert producer["tokenProcessorConfig"]["blockSizeTokens"] == KV_BLOCK_TOKENS
    endpoint = settings.server.kv_events_endpoint
    events = producer["kvEventsConfig"]
    where = settings.server.kv_events_socket()
    port = int(endpoint.rsplit(":", 1)[1])
    # The picker connects to each pod's IP: the pod binds that, and no other interface.
    assert (where.bind, where.address) == (True, f"tcp://10.1.2.3:{port}")
    assert events["discoverPods"] and events["podDiscoveryConfig"]["socketPort"] == port
    assert {"name": "kv-events", "containerPort": port, "protocol": "TCP"} in server["ports"]
    topic = settings.server.kv_events_topic_for(settings.model.model_name, "unused")
    assert topic.startswith(events["topicFilter"])
    assert topic == f"kv@10.1.2.3:{settings.server.port}@{settings.model.model_name}"
    # Its tokens come from the server's render routes, for the model the server serves.
    assert settings.server.render_open
    tokens = plugins["token-producer"]
    assert tokens["modelName"] == settings.model.model_name
    service = next(
        o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "onnx-genai-server"
    )
    assert tokens["vllm"]["url"] == f"http://{service['metadata']['name']}"
    assert service["spec"]["ports"][0]["port"] == 80


def test_only_the_picker_reaches_the_kv_events_port() -> None:
    """The events carry every tenant's prompt tokens: the precise overlay's NetworkPolicy
    selects the server's pods and admits the picker's alone to the events' port; the HTTP port
    stays open to all, as without it."""
    objs = rendered(PRECISE)
    policy = by_kind(objs, "NetworkPolicy")
    server = server_container(objs)
    deployment = next(o for o in objs if o["metadata"]["name"] == "onnx-genai-server")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    picker_labels = picker_deployment(objs)["spec"]["template"]["metadata"]["labels"]
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert spec["policyTypes"] == ["Ingress"]
    named = {p["name"]: p["containerPort"] for p in server["ports"]}
    opened: dict[int, list[Any]] = {}
    for rule in spec["ingress"]:
        for port in rule["ports"]:
            number = named.get(port["port"], port["port"])
            opened.setdefault(number, []).append(rule.get("from"))
    assert set(opened) == {named["http"], named["kv-events"]}
    assert opened[named["http"]] == [None], "the HTTP port: open to all, as before"
    [[source]] = opened[named["kv-events"]]
    assert set(source) == {"podSelector"}, "the picker's pods, in this namespace"
    assert source["podSelector"]["matchLabels"].items() <= picker_labels.items()
    assert not source["podSelector"]["matchLabels"].items() <= pod_labels.items()
    # The approximate overlay publishes no events: no policy.
    assert not [o for o in rendered(APPROXIMATE) if o["kind"] == "NetworkPolicy"]


@pytest.mark.parametrize("overlay", [APPROXIMATE, PRECISE], ids=["approximate", "precise"])
def test_what_the_picker_reads_answers_without_the_key(
    overlay: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app as the overlay's pod runs it, a key set: /metrics answers the picker (the app is
    built, not started: no model, so the render routes answer 503 rather than 401)."""
    settings = settings_of(server_container(rendered(overlay)), monkeypatch)
    client = make_client(
        api_key="test-key",
        metrics_open=settings.server.metrics_open,
        render_open=settings.server.render_open,
    )
    text = client.get("/metrics").text
    for name in PICKER["defaultEngineMetrics"]["vllm"]:
        # Not yet: the block config (once a model is loaded) and LoRA (where adapters are).
        if name not in ("vllm:cache_config_info", "vllm:lora_requests_info"):
            assert re.search(rf"^{re.escape(name)}[ {{]", text, re.M), name
    render = client.post("/v1/completions/render", json={"prompt": "hi"})
    assert render.status_code == (503 if settings.server.render_open else 401)


# ---- KServe ---------------------------------------------------------------------------------


def test_kserve_runs_this_server_in_its_main_container(monkeypatch: pytest.MonkeyPatch) -> None:
    service = load_one(KSERVE)
    [main] = service["spec"]["template"]["containers"]
    assert main["name"] == "main", "KServe merges the container named main"
    assert main["command"] == ["python", "main_genai.py"]
    settings = settings_of(main, monkeypatch)
    flags = dict(zip(main["args"][::2], main["args"][1::2], strict=True))
    port = int(flags["--port"])
    assert port == 8000, "KServe's template, probes and pool use 8000"
    assert settings.model.model_name == service["spec"]["model"]["name"]
    assert settings.model.model_dir == Path("/mnt/models")  # KServe's storage mount
    assert settings.server.metrics_open
    assert set(plain_env(main)) <= set(env_names())
    client = make_client()  # built, not started: probes answer 503 "loading", without a key
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        get = main[probe]["httpGet"]
        assert (get["port"], get["scheme"]) == (port, "HTTP")
        assert client.get(get["path"]).json()["status"] == "loading"
    check_picker_config(service["spec"]["router"]["scheduler"]["config"]["inline"])


def test_the_deployment_doc_names_the_files() -> None:
    doc = (REPO_ROOT / "docs" / "deployment.md").read_text()
    assert "### Routing across replicas" in doc
    for path in (APPROXIMATE, PRECISE, KSERVE, KUBE / "components" / "inference-pool"):
        assert str(path.relative_to(REPO_ROOT)) in doc, path

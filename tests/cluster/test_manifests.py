"""The manifests of ``deploy/`` have the structure KubeRay requires, and keep to the rules its
operator adds; the job examples run what a deployment needs. No Kubernetes cluster: the schema
below is the part of KubeRay's ``ray.io/v1`` CRDs (``RayCluster``, ``RayJob``) these manifests
use, written out here, with the operator's checks as code."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
CONTAINER = {
    "type": "object",
    "required": ["name", "image"],
    "properties": {
        "name": {"type": "string"},
        "image": {"type": "string"},
        "ports": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["containerPort"],
                "properties": {"containerPort": {"type": "integer"}, "name": {"type": "string"}},
            },
        },
        "env": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}},
            },
        },
        "volumeMounts": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "mountPath"],
                "properties": {"name": {"type": "string"}, "mountPath": {"type": "string"}},
            },
        },
    },
}
POD_TEMPLATE = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "required": ["containers"],
            "properties": {
                "containers": {"type": "array", "minItems": 1, "items": CONTAINER},
                "volumes": {"type": "array", "items": {"type": "object", "required": ["name"]}},
            },
        }
    },
}
CLUSTER_SPEC = {
    "type": "object",
    "required": ["headGroupSpec"],
    "properties": {
        "rayVersion": {"type": "string"},
        "headGroupSpec": {
            "type": "object",
            "required": ["template"],
            "properties": {"rayStartParams": STRINGS, "template": POD_TEMPLATE},
        },
        "workerGroupSpecs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["groupName", "maxReplicas", "minReplicas", "template"],
                "properties": {
                    "groupName": {"type": "string"},
                    "replicas": {"type": "integer", "minimum": 0},
                    "minReplicas": {"type": "integer", "minimum": 0},
                    "maxReplicas": {"type": "integer", "minimum": 0},
                    "rayStartParams": STRINGS,
                    "template": POD_TEMPLATE,
                },
            },
        },
    },
}
METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string"}, "labels": STRINGS},
}
SCHEMAS: dict[str, dict[str, Any]] = {
    "RayCluster": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "ray.io/v1"},
            "metadata": METADATA,
            "spec": CLUSTER_SPEC,
        },
    },
    "RayJob": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "ray.io/v1"},
            "metadata": METADATA,
            "spec": {
                "type": "object",
                "properties": {
                    "entrypoint": {"type": "string"},
                    "runtimeEnvYAML": {"type": "string"},
                    "submissionMode": {
                        "enum": ["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"]
                    },
                    "shutdownAfterJobFinishes": {"type": "boolean"},
                    "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
                    "activeDeadlineSeconds": {"type": "integer", "exclusiveMinimum": 0},
                    "clusterSelector": STRINGS,
                    "rayClusterSpec": CLUSTER_SPEC,
                },
            },
        },
    },
    "PersistentVolumeClaim": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "v1"},
            "metadata": METADATA,
            "spec": {
                "type": "object",
                "required": ["accessModes", "resources"],
                "properties": {"accessModes": {"type": "array", "items": {"type": "string"}}},
            },
        },
    },
}
#: A DNS-1035 label, as Kubernetes names of these kinds must be.
LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            found.append((path.name, document))
    return found


def problems(document: dict[str, Any]) -> list[str]:
    """What is wrong with a manifest: its schema, then the operator's own rules."""
    kind = document.get("kind")
    if kind not in SCHEMAS:
        return [f"unknown kind {kind!r}"]
    validator = jsonschema.Draft7Validator(SCHEMAS[kind])
    found = [
        f"{'/'.join(map(str, error.path)) or '<root>'}: {error.message}"
        for error in validator.iter_errors(document)
    ]
    name = document["metadata"]["name"]
    longest = {"RayCluster": 53, "RayJob": 47}.get(kind, 63)
    if not LABEL.match(name) or len(name) > longest:
        found.append(f"name {name!r} is no DNS-1035 label of at most {longest} characters")
    spec = document["spec"]
    if kind == "RayJob":
        if ("rayClusterSpec" in spec) == ("clusterSelector" in spec):
            found.append("one of rayClusterSpec or clusterSelector must be set")
        if spec.get("suspend") and not spec.get("shutdownAfterJobFinishes"):
            found.append("suspend needs shutdownAfterJobFinishes")
        if "runtimeEnvYAML" in spec:
            yaml.safe_load(spec["runtimeEnvYAML"])
        spec = spec.get("rayClusterSpec", {})
    for group in spec.get("workerGroupSpecs", []):
        if (
            not group["minReplicas"]
            <= group.get("replicas", group["minReplicas"])
            <= group["maxReplicas"]
        ):
            found.append(f"group {group.get('groupName')}: replicas out of min..max")
    head = spec.get("headGroupSpec", {})
    for params in [head.get("rayStartParams", {})] + [
        g.get("rayStartParams", {}) for g in spec.get("workerGroupSpecs", [])
    ]:
        if "labels" in params:
            found.append("rayStartParams cannot set labels")
    return found


def test_every_manifest_has_the_structure_kuberay_requires() -> None:
    found = documents()
    assert {kind["kind"] for _, kind in found} == {"RayCluster", "RayJob", "PersistentVolumeClaim"}
    for name, document in found:
        assert problems(document) == [], name


def test_the_check_finds_what_kuberay_would_refuse() -> None:
    (cluster,) = [d for _, d in documents() if d["kind"] == "RayCluster"]
    broken = json.loads(json.dumps(cluster))
    broken["metadata"]["name"] = "Relay_Cluster"
    broken["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = 0
    del broken["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    broken["spec"]["workerGroupSpecs"][0]["minReplicas"] = 9
    del broken["spec"]["workerGroupSpecs"][0]["groupName"]
    found = problems(broken)
    assert any("num-cpus: 0 is not of type 'string'" in p for p in found)
    assert any("'image' is a required property" in p for p in found)
    assert any("'groupName' is a required property" in p for p in found)
    assert any("replicas out of min..max" in p for p in found)
    assert any("no DNS-1035 label" in p for p in found)


def test_every_pod_mounts_the_shared_volume_and_runs_the_relay_image() -> None:
    (cluster,) = [d for _, d in documents() if d["kind"] == "RayCluster"]
    spec = cluster["spec"]
    templates = [spec["headGroupSpec"]["template"]] + [
        g["template"] for g in spec["workerGroupSpecs"]
    ]
    for template in templates:
        (container,) = template["spec"]["containers"]
        assert container["image"].startswith("relay-runtime:")
        assert {"name": "shared", "mountPath": "/shared"} in container["volumeMounts"]
        claims = [v["persistentVolumeClaim"]["claimName"] for v in template["spec"]["volumes"]]
        assert claims == ["relay-shared"]
    (claim,) = [d for _, d in documents() if d["kind"] == "PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    # The image's Ray is the cluster's.
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    image = re.search(r"ARG RAY_IMAGE=rayproject/ray:([0-9.]+)", dockerfile)
    assert image is not None and image.group(1) == spec["rayVersion"]
    assert '"/tmp/relay-src[ray]"' in dockerfile


def test_the_jobs_run_relay_on_the_shared_directory(tmp_path: Path) -> None:
    (job,) = [d for _, d in documents() if d["kind"] == "RayJob"]
    commands = [shlex.split(part) for part in job["spec"]["entrypoint"].split(";")]
    assert [c[:3] for c in commands] == [["relay", "cluster", "up"], ["relay", "cluster", "run"]]
    for command in commands:
        assert command[command.index("--rollout-dir") + 1] == "/shared/relay/sessions"
    script = DEPLOY / "submit-job.sh"
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0
    text = script.read_text(encoding="utf-8")
    assert "ray job submit" in text and "--runtime-env-json" in text
    env = re.search(r"--runtime-env-json '(.*)'", text)
    assert env is not None
    runtime_env = json.loads(env.group(1).replace("'\"$scripts\"'", str(tmp_path)))
    assert runtime_env["working_dir"] == str(tmp_path)
    assert "relay cluster run './*.jsonl'" in text

"""The README.md ``tritonlab deploy`` writes beside the manifests: what was picked and measured,
the image and the advisories it is past, who may reach the service, and the commands to apply.

Markdown, not a manifest: the run's free text (a variant's description, the pick's source)
is shown on one line each (``one_line``), so it cannot start a heading or a list of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonlab.deploy.autoscaling import QUEUE_METRIC
from tritonlab.deploy.hardening import TMP_SIZE_LIMIT, image_tag
from tritonlab.deploy.pick import DeployPick
from tritonlab.deploy.served_repository import pipeline_models


@dataclass(frozen=True)
class ReadmeFacts:
    """What ``write_deployment`` decided, for the README."""

    target: str
    namespace: str
    uri: str
    own_pvc: bool
    workload: str
    replicas: tuple[int, int]
    cores: int
    image: str
    advisory: str  # hardening.image_advisory's sentence
    measured_tag: str | None  # the NGC tag of the measured server, when known
    clients: str  # who reaches the inference ports, in words
    scrapers: str  # who reaches the metrics port, in words
    ports: tuple[int, int, int]  # http, grpc, metrics


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks of any kind included) as one space."""
    return " ".join(text.split())


def _image_line(pick: DeployPick, f: ReadmeFacts) -> str:
    line = f"- Image: {f.advisory}."
    if "@sha256:" not in f.image:
        line += (
            " A tag can be moved to other content: pin it with `--image-digest sha256:...` "
            f"(the digest `docker buildx imagetools inspect {f.image}` prints)."
        )
    if f.target == "kserve":
        line += (
            " KServe runs the image of its `kserve-tritonserver` ServingRuntime at the tag in "
            "`runtimeVersion`: pin the runtime's image by digest there."
        )
    measured = f" ({f.measured_tag})" if f.measured_tag else ""
    line += f" The run measured tritonserver {pick.server_version}{measured}"
    if f.measured_tag is None or f.measured_tag != image_tag(f.image):
        line += (
            ", another release than the image's: it reads the same `config.pbtxt`, but measure "
            "the service as deployed (step 5); a GPU node needs the driver the image's release "
            "notes name"
        )
    return line + "."


def _doubt(pick: DeployPick) -> str:
    """The run's doubt (``stats/run_trust.py``), as a paragraph after the source; '' for a
    quiet run."""
    caveat = pick.trust.caveat() if pick.trust is not None else ""
    if not caveat:
        return ""
    return (
        f"\n\n**Note: {one_line(caveat)}.** The capacity below was measured in that run; "
        "measure again on a quiet machine before sizing replicas from it."
    )


def readme(pick: DeployPick, f: ReadmeFacts) -> str:
    """The README's text."""
    v = pick.variant
    http, grpc, metrics = f.ports
    models = pipeline_models(pick)
    each = (
        f" for each of {', '.join(f'`{n}`' for n in models)} (the whole pipeline)"
        if len(models) > 1
        else ""
    )
    copy = f"model_repository/{pick.model_name}" if len(models) == 1 else "model_repository/<model>"
    fill = (
        f"`pvc.yaml` claims a read-only volume; fill it once, e.g. from a pod that mounts it "
        f"read-write: `kubectl cp {copy} <pod>:/models/`{each}."
        if f.own_pvc
        else f"Upload the repository: `aws s3 sync model_repository/ {f.uri}/` (or gsutil/az); "
        "credentials go in the optional Secret `triton-storage`."
    )
    files = (["pvc.yaml"] if f.own_pvc else []) + ["networkpolicy.yaml"]
    files += (
        ["inferenceservice.yaml"] if f.target == "kserve" else ["deployment.yaml", "service.yaml"]
    )
    files.append("hpa.yaml")
    apply = "kubectl apply " + " ".join(f"-f {name}" for name in files)
    metric = f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{f.namespace}/pods/*/{QUEUE_METRIC}"
    where = (
        "every port of the predictor pods (KServe's runtime chooses them)"
        if f.target == "kserve"
        else f"ports {http} (HTTP) and {grpc} (gRPC)"
    )
    return f"""# Deploying {pick.model_name}: {one_line(v.description)}

Written by `tritonlab deploy` ({f.target}) from the run's {one_line(pick.source)}.{_doubt(pick)}

- Capacity {one_line(pick.capacity_comment())}.
- Replicas: {f.replicas[0]} to {f.replicas[1]}, scaled on `{QUEUE_METRIC}` (mean queue time per
  request over 30 s, from Triton's metrics on port {metrics}).
- CPU: {f.cores} cores requested per replica ({v.instance_count} instances x
  {v.intra_op_threads or "all"} threads, as measured).
{_image_line(pick, f)}
- Who may connect (`networkpolicy.yaml`): Triton's API has no authentication (inference, model
  control, shared-memory registration), so only {f.clients} reach {where}, and only
  {f.scrapers} reach the metrics port {metrics}; nothing else reaches the pods (`--allow-from`,
  `--allow-metrics-from` name others: `[NAMESPACE:]key=value[,key=value]`). The cluster's
  network plugin must enforce NetworkPolicy (Calico, Cilium and most others do); probes come
  from the node's kubelet, which such plugins admit. Egress is not restricted.
- Contained: non-root (uid 1000), no privilege escalation, no capabilities, read-only root
  filesystem with a writable `/tmp` of at most {TMP_SIZE_LIMIT}, no service-account token.

## Steps

1. Model repository (`model_repository/`, the measured `config.pbtxt`): {fill}
2. Label the pods that call the model as `networkpolicy.yaml` names them (above): no other
   pod reaches it.
3. `{apply}`
4. Metrics adapter: merge `metrics-adapter-config.yaml`'s rule into your Prometheus adapter's
   rules (it turns Triton's queue-duration counter into `{QUEUE_METRIC}` per pod), so that
   `kubectl get --raw {metric}` answers; Prometheus must be
   one of the scrapers the NetworkPolicy admits.
5. Measure the service as deployed, from a pod the NetworkPolicy admits: `tritonlab perf --url
   http://<{f.workload}>:{http} --grpc-url <{f.workload}>:{grpc} --model {pick.model_name}` (a
   service, not one server: the per-replica figures stay unknown).

The manifests were validated offline against the Kubernetes schema by `tritonlab deploy`
(`kubernetes-validate`); nothing was applied to a cluster.
"""

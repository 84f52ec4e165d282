"""The HorizontalPodAutoscaler ``tritonlab deploy`` writes, and the replicas it starts from.

It scales on queue time per request (``avg_time_queue_us``, made from Triton's
``nv_inference_queue_duration_us`` and ``nv_inference_request_success`` by the Prometheus
adapter rule in ``metrics-adapter-config.yaml``, as Triton's autoscaling guide does); its target
is the queue time at the pick's operating point. The minimum replicas for a target load come
from the pick's capacity (``decisions.capacity``), the figure ``tritonlab capacity`` prints: at a
p99 budget the cautious end of the range, without one the median as measured.
"""

from __future__ import annotations

from typing import Any

import yaml

from tritonlab.decisions.capacity import P99_RULE, Replicas
from tritonlab.deploy.pick import DeployPick

QUEUE_METRIC = "avg_time_queue_us"


def replicas_for_target(pick: DeployPick, target: float | None) -> Replicas | None:
    """The replicas ``target`` (infer/s) needs from the pick's capacity, if it has both."""
    if not target or pick.capacity is None or pick.capacity.point is None:
        return None
    return pick.capacity.replicas(target)


def add_sizing_notes(hpa: dict[str, Any], pick: DeployPick, sized: Replicas | None) -> None:
    """At a p99 budget, the HPA's annotations say the capacity rule and, with a target, the
    replicas for it (without a budget the manifests stay as they were before budgets existed)."""
    if not pick.budget_sized:
        return
    notes = hpa["metadata"]["annotations"]
    notes["tritonlab/capacity-rule"] = P99_RULE
    if sized is not None:
        notes["tritonlab/replicas-for-target-load"] = (
            f"{sized.target_load_infer_per_s:,.0f} infer/s: {sized.words}"
        )


def queue_target_us(pick: DeployPick) -> int:
    """Scale out when the mean queue time per request passes what it was at the measured
    capacity (at least 1 ms: below that a CPU server's queue is noise)."""
    return max(1000, round(pick.queue_us_per_request or 0))


def hpa_manifest(
    pick: DeployPick, workload: str, namespace: str, min_replicas: int, max_replicas: int
) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": workload,
            "namespace": namespace,
            "annotations": {
                "tritonlab/measured-capacity-per-replica": pick.capacity_comment(),
                "tritonlab/queue-target": (
                    f"{queue_target_us(pick)} us mean queue time per request; at the measured "
                    f"capacity it was {pick.queue_us_per_request or 0:,.0f} us"
                ),
            },
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": QUEUE_METRIC},
                        "target": {
                            "type": "AverageValue",
                            "averageValue": str(queue_target_us(pick)),
                        },
                    },
                }
            ],
            "behavior": {
                "scaleDown": {"stabilizationWindowSeconds": 300},
                "scaleUp": {"stabilizationWindowSeconds": 30},
            },
        },
    }


def adapter_config(namespace: str) -> dict[str, Any]:
    rule = {
        "seriesQuery": f'nv_inference_queue_duration_us{{namespace="{namespace}",pod!=""}}',
        "resources": {
            "overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
        },
        "name": {"matches": "nv_inference_queue_duration_us", "as": QUEUE_METRIC},
        "metricsQuery": (
            "avg(delta(nv_inference_queue_duration_us{<<.LabelMatchers>>}[30s])"
            "/(1+delta(nv_inference_request_success{<<.LabelMatchers>>}[30s]))) by (<<.GroupBy>>)"
        ),
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "tritonlab-adapter-rules", "namespace": "monitoring"},
        "data": {"config.yaml": yaml.safe_dump({"rules": [rule]}, sort_keys=False)},
    }

"""``tritonlab deploy``: Kubernetes (or KServe) manifests for the configuration a run picked,
validated offline against Kubernetes' schemas; nothing is applied to a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritonlab.cli.common import app, out, user_errors
from tritonlab.cli.options import target_load_option


@app.command()
def deploy(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (run, sweep or tune).")],
    to: Annotated[
        str, typer.Option("--to", help="kubernetes (Deployment, Service, HPA) or kserve.")
    ] = "kubernetes",
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the manifests.")] = Path(
        "deploy-out"
    ),
    pick: Annotated[
        str, typer.Option("--pick", help="throughput or latency (a sweep's two picks).")
    ] = "throughput",
    repository: Annotated[
        str | None,
        typer.Option(
            "--repository",
            help="Where the cluster finds the model repository: s3://, gs://, as:// or "
            "pvc://CLAIM/PATH (the path optional). Default: a PersistentVolumeClaim of its "
            "own (pvc.yaml).",
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Resource name (default: the model's).")
    ] = None,
    namespace: Annotated[str, typer.Option("--namespace")] = "default",
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="Default: nvcr.io/nvidia/tritonserver:25.10-py3 (past NVIDIA's August 2025 "
            "Triton security fixes, which came in 25.07).",
        ),
    ] = None,
    image_digest: Annotated[
        str | None,
        typer.Option(
            "--image-digest",
            help="sha256:<64 hex>: pin the image by digest (a tag can be moved to other content).",
        ),
    ] = None,
    allow_from: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-from",
            help="[NAMESPACE:]key=value[,key=value]: pods the NetworkPolicy lets reach the "
            "inference ports (repeat for more). Default: tritonlab-client=true in --namespace.",
        ),
    ] = None,
    allow_metrics_from: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-metrics-from",
            help="[NAMESPACE:]key=value[,key=value]: pods that may scrape the metrics port "
            "(e.g. monitoring:app.kubernetes.io/name=prometheus). Default: tritonlab-client=true "
            "in --namespace.",
        ),
    ] = None,
    min_replicas: Annotated[int, typer.Option("--min-replicas", min=1)] = 1,
    max_replicas: Annotated[int, typer.Option("--max-replicas", min=1)] = 4,
    target_load: Annotated[
        float | None,
        target_load_option(
            "Load (infer/s) to carry: sizes the minimum replicas from the measured capacity."
        ),
    ] = None,
    p99_budget_ms: Annotated[
        float | None,
        typer.Option(
            "--p99-budget-ms",
            help="Size from the capacity at this p99 budget (ms), as `tritonlab capacity` "
            "does: the pick's load point of highest throughput whose p99 holds it; with "
            "--target-load, the minimum replicas are the cautious end of the range.",
        ),
    ] = None,
    no_validate: Annotated[
        bool, typer.Option("--no-validate", help="Skip the offline schema check.")
    ] = False,
) -> None:
    """Write manifests that serve the run's pick as measured (image, repository, threads,
    probes, metrics, autoscaling on queue time), and check them against the schema.

    Example: tritonlab deploy sweep-out --to kubernetes --repository s3://models/mlp --out k8s
    --target-load 20000 --p99-budget-ms 50
    """
    from tritonlab.decisions.capacity import check_sizing
    from tritonlab.deploy.kubernetes import DeployOptions, write_deployment
    from tritonlab.deploy.pick import resolve_pick
    from tritonlab.deploy.validate import KUBERNETES_VERSION, validate_files

    with user_errors():
        p99_budget_us = None if p99_budget_ms is None else p99_budget_ms * 1000.0
        check_sizing(None, p99_budget_us)
        chosen = resolve_pick(run_dir, pick, p99_budget_us)
        written = write_deployment(
            chosen,
            run_dir,
            out_dir,
            DeployOptions(
                target=to,
                name=name,
                namespace=namespace,
                repository_uri=repository,
                image=image,
                image_digest=image_digest,
                allow_from=tuple(allow_from or ()),
                allow_metrics_from=tuple(allow_metrics_from or ()),
                min_replicas=min_replicas,
                max_replicas=max_replicas,
                target_load_infer_per_s=target_load,
            ),
        )
        out.print(f"{chosen.source}: {chosen.variant.description}", highlight=False, markup=False)
        out.print(f"capacity {chosen.capacity_comment()}", highlight=False, markup=False)
        if chosen.trust is not None and (caveat := chosen.trust.caveat()):
            out.print(f"warning: {caveat}", highlight=False, markup=False)
        for warning in written.warnings:
            out.print(f"warning: {warning}", highlight=False, markup=False)
        if not no_validate:
            count = validate_files(written.manifests)
            out.print(
                f"{count} resources valid against the Kubernetes {KUBERNETES_VERSION} schema "
                "(offline; nothing applied)",
                highlight=False,
            )
        out.print(
            f"wrote {', '.join(p.name for p in written.manifests)} and README.md to {out_dir}",
            highlight=False,
        )

"""Deploying the pick: manifests for Kubernetes (and KServe) of the configuration a run chose.

``pick`` reads which configuration a run folder recommends and what one replica of it was
measured to carry; ``kubernetes`` writes the manifests, the native model repository and a
README with the commands; ``validate`` checks them offline against Kubernetes' schemas.
"""

"""Spreading a sweep's measurements over a cluster (Ray): one measuring slot per node.

``nodes`` holds what a node is (machine, versions) and the start-up checks, ``measurer`` the
node side (its own server, measuring the cells it is sent), ``ray_session`` the driver side
(one actor per node, whole rounds per node, every cell written to the driver's run folder).
Ray is an optional extra (``pip install 'tritonlab[ray]'``); nothing here imports it at module
load, so a local run never needs it.
"""

"""Pieces of `podctl.sim.pod` that need no podman."""

from __future__ import annotations

import ipaddress

from podctl.sim import pod


def test_subnet_overlap_detection_names_only_real_overlaps():
    site_cidr = ipaddress.IPv4Network("10.89.0.0/24")
    assert pod._overlaps("10.89.0.0/24", site_cidr)
    assert pod._overlaps("10.89.0.0/16", site_cidr)
    assert not pod._overlaps("10.88.0.0/16", site_cidr)
    assert not pod._overlaps("not-a-cidr", site_cidr)


def test_an_explicit_pod_name_is_used_without_asking_podman():
    assert pod.resolve_pod(podman=None, pod="sim") == "sim"  # type: ignore[arg-type]

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


def test_a_systemd_not_answering_yet_is_asked_again_until_it_runs_or_the_deadline_passes(tmp_path):
    # systemctl says `offline` while it cannot reach the manager: a booting container's systemd
    # says so for a moment (head01 in a make demo's sim up, 2026-12-06), then `running`.
    from podctl.sim.health import Deadline, wait_systemd
    from podctl.sim.podman import Podman

    answers = tmp_path / "answers"
    fake = tmp_path / "podman"
    fake.write_text(
        "#!/bin/sh\n# podman --runtime R exec CONTAINER ... systemctl is-system-running --wait\n"
        f"head -n 1 {answers}; sed -i 1d {answers}\n"
    )
    fake.chmod(0o755)
    answers.write_text("offline\noffline\nrunning\n")
    assert wait_systemd(Podman(str(fake), "runc"), "node", Deadline.after(30)) == "running"
    # One that stays offline is reported as such once the deadline has passed.
    answers.write_text("offline\n" * 1000)
    assert wait_systemd(Podman(str(fake), "runc"), "node", Deadline.after(1)) == "offline"
    # A state a booted systemd does not leave is final at once.
    answers.write_text("maintenance\nrunning\n")
    assert wait_systemd(Podman(str(fake), "runc"), "node", Deadline.after(30)) == "maintenance"

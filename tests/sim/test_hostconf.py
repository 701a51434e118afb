"""Merging the sim's settings into containers.conf without clobbering."""

from __future__ import annotations

import tomllib

from podctl.sim.hostconf import main, merge_containers_conf

POOL = [{"base": "10.120.0.0/16", "size": 24}]


def test_empty_file_gets_every_section():
    conf = tomllib.loads(merge_containers_conf(""))
    assert conf == {
        "containers": {"default_ulimits": ["nofile=1024:1024", "nproc=4096:4096"]},
        "engine": {"runtime": "runc"},
        "network": {"default_subnet_pools": POOL},
    }


def test_other_settings_and_comments_survive_and_old_values_are_replaced():
    before = (
        "# site policy\n"
        "[containers]\n"
        'log_driver = "k8s-file"\n'
        "default_ulimits = [\n"
        '  "nofile=65535:65535",\n'
        "]\n"
        "\n"
        "[network]\n"
        'network_backend = "cni"\n'
        "\n"
        "[engine]\n"
        'runtime = "crun"  # fails on hybrid cgroups\n'
        'events_logger = "file"\n'
        "\n"
        "[engine.runtimes]\n"
        'runc = ["/usr/sbin/runc"]\n'
    )
    after = merge_containers_conf(before)
    assert "# site policy" in after
    conf = tomllib.loads(after)
    assert conf["containers"] == {"log_driver": "k8s-file", "default_ulimits": ["nofile=1024:1024", "nproc=4096:4096"]}
    assert conf["network"] == {"network_backend": "cni", "default_subnet_pools": POOL}
    assert conf["engine"]["runtime"] == "runc"
    assert conf["engine"]["events_logger"] == "file"
    assert conf["engine"]["runtimes"] == {"runc": ["/usr/sbin/runc"]}


def test_merge_is_idempotent(tmp_path, capsys):
    path = tmp_path / "containers.conf"
    path.write_text('[engine]\ncgroup_manager = "cgroupfs"\n')
    main(["hostconf", str(path)])
    once = path.read_text()
    main(["hostconf", str(path)])
    assert path.read_text() == once
    assert "already has the sim settings" in capsys.readouterr().out

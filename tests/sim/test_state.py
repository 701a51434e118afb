"""Where the sim keeps its state."""

from __future__ import annotations

from pathlib import Path

from podctl.core import state


def test_state_dir_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PODCTL_STATE_DIR", str(tmp_path))
    assert state.pod_dir("sim") == tmp_path / "sim" / "sim"
    assert state.image_cache_dir() == tmp_path / "sim" / "image-cache"
    assert state.ssh_key_path("sim") == tmp_path / "sim" / "sim" / "id_ed25519"


def test_default_state_dir(monkeypatch):
    monkeypatch.delenv("PODCTL_STATE_DIR", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert state.pod_dir("sim") == Path.home() / ".local" / "state" / "podctl" / "sim" / "sim"


def test_faults_round_trip_and_empty_entries_vanish(monkeypatch, tmp_path):
    monkeypatch.setenv("PODCTL_STATE_DIR", str(tmp_path))
    assert state.read_faults("p") == {}
    state.write_faults("p", {"node01": {"rate": "50mbit"}, "node02": {}})
    assert state.read_faults("p") == {"node01": {"rate": "50mbit"}}
    state.faults_path("p").write_text("not json")
    assert state.read_faults("p") == {}

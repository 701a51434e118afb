"""`podctl sim` options that are refused before podman is asked anything."""

from __future__ import annotations

from click.testing import CliRunner

from podctl.sim.cli import sim


def test_an_unsupported_release_is_refused_naming_the_supported_ones():
    result = CliRunner().invoke(sim, ["image", "--release", "11"])
    assert result.exit_code == 2
    assert "release '11' has no sim node image" in result.output
    assert "debian 12, debian 13" in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)

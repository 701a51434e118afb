"""Which node images a build or `sim down` removes (a fake podman that answers from canned JSON)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from podctl.core import platforms
from podctl.sim import image
from podctl.sim.podman import Podman

BOOKWORM = image.recipe_for(platforms.by_key("debian-12"), ())
TRIXIE = image.recipe_for(platforms.by_key("debian-13"), ())


def _row(image_id: str, recipe: str, platform: str | None) -> dict[str, object]:
    labels = {"io.podctl.image": "sim-node", "io.podctl.recipe": recipe}
    if platform is not None:
        labels["io.podctl.platform"] = platform
    return {"Id": image_id, "Names": [f"localhost/podctl-sim-node:{image_id}"], "Labels": labels}


def _fake_podman(tmp_path: Path, images: list[dict[str, object]], containers: list[dict[str, object]]) -> Podman:
    """A podman that answers `images` and `ps` from canned JSON and logs every `rmi`."""
    (tmp_path / "images.json").write_text(json.dumps(images))
    (tmp_path / "ps.json").write_text(json.dumps(containers))
    exe = tmp_path / "podman"
    exe.write_text(
        "#!/bin/sh\n"
        "shift 2\n"  # --runtime RUNTIME
        'case "$1" in\n'
        f"  images) cat {tmp_path / 'images.json'} ;;\n"
        f"  ps) cat {tmp_path / 'ps.json'} ;;\n"
        f'  rmi) echo "$2" >> {tmp_path / "rmi"} ;;\n'
        "  *) exit 1 ;;\n"
        "esac\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return Podman(str(exe), "/usr/sbin/runc")


def _removed(tmp_path: Path) -> list[str]:
    log = tmp_path / "rmi"
    return log.read_text().split() if log.exists() else []


def test_a_build_prunes_older_recipes_of_its_own_platform_only(tmp_path):
    podman = _fake_podman(
        tmp_path,
        [
            _row("trixie-now", TRIXIE.digest(), "debian-13"),
            _row("trixie-old", "0" * 64, "debian-13"),
            _row("bookworm-now", BOOKWORM.digest(), "debian-12"),
            _row("bookworm-old", "1" * 64, "debian-12"),
        ],
        [],
    )
    assert image.prune_old_images(podman, [TRIXIE]) == ["trixie-old"]
    assert _removed(tmp_path) == ["trixie-old"]


def test_the_other_releases_image_is_kept_even_when_it_is_the_only_one(tmp_path):
    podman = _fake_podman(
        tmp_path,
        [_row("trixie-now", TRIXIE.digest(), "debian-13"), _row("bookworm-now", BOOKWORM.digest(), "debian-12")],
        [],
    )
    assert image.prune_old_images(podman, [TRIXIE]) == []
    assert _removed(tmp_path) == []


def test_an_image_a_container_uses_is_kept(tmp_path):
    podman = _fake_podman(
        tmp_path,
        [_row("trixie-now", TRIXIE.digest(), "debian-13"), _row("trixie-old", "0" * 64, "debian-13")],
        [{"Id": "c1", "ImageID": "trixie-old", "State": "exited"}],
    )
    assert image.prune_old_images(podman, [TRIXIE]) == []
    assert _removed(tmp_path) == []


def test_images_without_the_platform_label_are_never_pruned(tmp_path):
    # Built before one image per release, or by an older podctl of another checkout on this host:
    # nothing says which release they hold.
    podman = _fake_podman(
        tmp_path,
        [
            _row("unlabelled", "2" * 64, None),
            _row("trixie-now", TRIXIE.digest(), "debian-13"),
            _row("bookworm-now", BOOKWORM.digest(), "debian-12"),
        ],
        [],
    )
    assert image.prune_old_images(podman, [BOOKWORM, TRIXIE]) == []
    assert _removed(tmp_path) == []


def test_nothing_is_pruned_for_a_platform_whose_current_image_is_missing(tmp_path):
    # `sim down` prunes for every release; one never built keeps its older image.
    podman = _fake_podman(
        tmp_path,
        [_row("trixie-now", TRIXIE.digest(), "debian-13"), _row("bookworm-old", "1" * 64, "debian-12")],
        [],
    )
    assert image.prune_old_images(podman, [BOOKWORM, TRIXIE]) == []
    assert _removed(tmp_path) == []


def test_the_untagged_image_a_forced_rebuild_left_is_pruned(tmp_path):
    left = {**_row("trixie-before", TRIXIE.digest(), "debian-13"), "Names": None}
    podman = _fake_podman(tmp_path, [_row("trixie-now", TRIXIE.digest(), "debian-13"), left], [])
    assert image.prune_old_images(podman, [TRIXIE]) == ["trixie-before"]

"""The node image recipe and its hash (no podman, no debootstrap)."""

from __future__ import annotations

import dataclasses

import pytest

from podctl.core import platforms
from podctl.sim import image
from podctl.sim.image import BakedFile, recipe_for

NO_CAS: tuple[BakedFile, ...] = ()
BOOKWORM = platforms.find("debian", "12")
TRIXIE = platforms.find("debian", "13")


def newest_recipe(ca_files: tuple[BakedFile, ...]) -> image.Recipe:
    return recipe_for(platforms.DEFAULT, ca_files)


def test_digest_is_stable():
    assert newest_recipe(NO_CAS).digest() == newest_recipe(NO_CAS).digest()


def test_digest_changes_with_packages_and_rootfs_key_too():
    base = newest_recipe(NO_CAS)
    more = dataclasses.replace(base, packages=(*base.packages, "chrony"))
    assert more.digest() != base.digest()
    assert more.rootfs_key() != base.rootfs_key()


def test_baked_file_changes_digest_but_not_the_debootstrap_cache_key():
    base = newest_recipe(NO_CAS)
    with_ca = newest_recipe((BakedFile("/usr/local/share/ca-certificates/proxy.crt", b"-----BEGIN CERT"),))
    assert with_ca.digest() != base.digest()
    assert with_ca.rootfs_key() == base.rootfs_key()


def test_file_mode_and_masked_units_are_part_of_the_digest():
    base = newest_recipe(NO_CAS)
    first = base.files[0]
    chmodded = dataclasses.replace(base, files=(dataclasses.replace(first, mode=0o600), *base.files[1:]))
    assert chmodded.digest() != base.digest()
    fewer_masks = dataclasses.replace(base, masked_units=base.masked_units[1:])
    assert fewer_masks.digest() != base.digest()


def test_tag_names_the_platform_and_the_recipe():
    recipe = newest_recipe(NO_CAS)
    assert recipe.tag == f"{image.IMAGE_REPO}:debian-13-{recipe.digest()[:12]}"


@pytest.mark.parametrize("platform", platforms.SUPPORTED, ids=lambda p: p.key)
def test_each_release_has_its_own_suite_and_sources(platform):
    recipe = recipe_for(platform, NO_CAS)
    assert recipe.platform == platform.key
    assert recipe.debootstrap_args()[-1] == platform.codename
    sources = {f.path: f.content.decode() for f in recipe.files}["/etc/apt/sources.list"]
    assert [line for line in sources.splitlines() if not line.startswith("#")] == [
        f"deb http://deb.debian.org/debian {platform.codename} main",
        f"deb http://deb.debian.org/debian {platform.codename}-updates main",
        f"deb http://deb.debian.org/debian-security {platform.codename}-security main",
    ]
    others = {p.codename for p in platforms.SUPPORTED} - {platform.codename}
    assert not any(codename in sources for codename in others)


def test_releases_differ_in_hash_tag_and_debootstrap_cache():
    bookworm, trixie = recipe_for(BOOKWORM, NO_CAS), recipe_for(TRIXIE, NO_CAS)
    assert bookworm.digest() != trixie.digest()
    assert bookworm.rootfs_key() != trixie.rootfs_key()
    assert bookworm.tag.startswith(f"{image.IMAGE_REPO}:debian-12-")
    assert trixie.tag.startswith(f"{image.IMAGE_REPO}:debian-13-")


def test_recipe_contains_what_later_stages_need():
    recipe = recipe_for(BOOKWORM, NO_CAS)
    for package in (
        "systemd",
        "systemd-sysv",
        "dbus",
        "openssh-server",
        "python3",
        "sudo",
        "iproute2",
        "ca-certificates",
    ):
        assert package in recipe.packages
    args = recipe.debootstrap_args()
    assert "--variant=minbase" in args and args[-1] == "bookworm"
    # trixie's first-boot `ssh-keygen -A` would add an RSA key the drop-in avoids.
    assert "sshd-keygen.service" in recipe.masked_units
    files = {f.path: f.content.decode() for f in recipe.files}
    sources = files["/etc/apt/sources.list"]
    for suite in ("bookworm main", "bookworm-updates main", "bookworm-security main"):
        assert suite in sources
    assert "https://" not in sources
    assert files["/etc/machine-id"] == ""
    assert "var/lib/dbus/machine-id" in recipe.removed
    assert "etc/ssh/ssh_host_*" in recipe.removed


def test_host_ca_bundle_and_local_cas_are_baked_in(tmp_path):
    bundle = tmp_path / "ca-certificates.crt"
    bundle.write_bytes(b"BUNDLE")
    local = tmp_path / "local"
    (local / "corp").mkdir(parents=True)
    (local / "corp" / "proxy.crt").write_bytes(b"PROXY")
    files = {f.path: f.content for f in image.host_ca_files(bundle, local)}
    assert files == {
        "/etc/ssl/certs/ca-certificates.crt": b"BUNDLE",
        "/usr/local/share/ca-certificates/corp/proxy.crt": b"PROXY",
    }


def test_customize_writes_files_masks_units_and_removes_build_leftovers(tmp_path):
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc/ssh").mkdir(parents=True)
    (rootfs / "etc/ssh/ssh_host_rsa_key").write_text("shared secret")
    (rootfs / "var/lib/dbus").mkdir(parents=True)
    (rootfs / "var/lib/dbus/machine-id").write_text("build id")
    (rootfs / "etc/machine-id").write_text("build id")
    recipe = newest_recipe(NO_CAS)
    image.customize(rootfs, recipe)
    assert not (rootfs / "etc/ssh/ssh_host_rsa_key").exists()
    assert not (rootfs / "var/lib/dbus/machine-id").exists()
    assert (rootfs / "etc/machine-id").read_text() == ""
    mask = rootfs / "etc/systemd/system/apt-daily.timer"
    assert mask.is_symlink() and str(mask.readlink()) == "/dev/null"
    assert (rootfs / "root/.ssh").stat().st_mode & 0o777 == 0o700
    # Idempotent: a second pass over the same tree changes nothing and does not fail.
    image.customize(rootfs, recipe)

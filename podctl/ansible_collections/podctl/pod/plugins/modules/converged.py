#!/usr/bin/python
"""The node's record of the last deploy that converged it (podctl.converged drives it)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import stat
import subprocess
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: converged
short_description: Record, check or forget the state a podctl deploy left on a node
description:
  - C(present) takes a snapshot of the resources a deploy run managed on this node (files,
    directories and links, whole trees, services, users, groups, the package database and the
    hostname) and keeps it with the fingerprint of the run's inputs in a root-only record.
  - C(verified) compares the record with the fingerprint given and with a new snapshot of the
    same resources; it never changes anything. C(converged) is true only when both match.
  - C(absent) removes the record, so that a run which stops half-way leaves none behind.
options:
  state:
    description: What to do with the record.
    type: str
    choices: [present, verified, absent]
    required: true
  fingerprint:
    description: The run's inputs (podctl.converged.fingerprint); needed by present and verified.
    type: str
  resources:
    description: For present, the resources to snapshot, by kind (files, trees, services, users, groups, nft_tables).
    type: dict
    default: {}
  path:
    description: Where the record lives.
    type: path
    default: /var/lib/podctl/converged.json
author: podctl
"""

EXAMPLES = r"""
- name: Is this node as the last deploy left it?
  podctl.pod.converged:
    state: verified
    fingerprint: "{{ podctl_converged_fingerprint }}"
  become: true
"""

RETURN = r"""
converged:
  description: The record's fingerprint and every resource's snapshot match (verified only).
  type: bool
  returned: always
why:
  description: Why not, one line per difference (at most 20).
  type: list
  elements: str
  returned: always
resources:
  description: How many resources the record holds.
  type: int
  returned: always
inputs_same:
  description: The record was made by a run of the fingerprint given (verified only; null without a
    readable record). A node that differs from its record in what it holds, not in its inputs, can
    be converged by a run on it alone.
  type: bool
  returned: when state is verified
"""

RECORD_VERSION = 1
# Files up to this size are compared by content; larger ones (wheels) by size, mtime and ctime.
HASH_LIMIT = 1 << 20
SHOW_WHY = 20
KINDS = ("files", "trees", "services", "users", "groups", "nft_tables")


def _mounts():
    """mountpoint -> 'fstype source', from the kernel's table (the last mount on a point wins)."""
    out = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            for line in handle:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) > 4 and len(rest) > 1:
                    point = fields[4].replace("\\040", " ")
                    out[point] = f"{rest[0]} {rest[1]}"
    except OSError:
        pass
    return out


def _file(path, mounts=None):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    owner = f"{stat.S_IMODE(st.st_mode):o} {st.st_uid}:{st.st_gid}"
    if stat.S_ISLNK(st.st_mode):
        return f"link -> {os.readlink(path)}"
    if stat.S_ISDIR(st.st_mode):
        mounted = (mounts or {}).get(path)
        return f"directory {owner}" + (f" with {mounted} mounted" if mounted else "")
    if not stat.S_ISREG(st.st_mode):
        return f"special {stat.S_IFMT(st.st_mode):o} {owner}"
    if st.st_size > HASH_LIMIT:
        return f"file {owner} size {st.st_size} mtime {st.st_mtime_ns} ctime {st.st_ctime_ns}"
    # Opened without following a link or waiting on a pipe swapped in since the lstat.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "changed while read"
        data = handle.read(HASH_LIMIT + 1)
    return f"file {owner} sha256 {hashlib.sha256(data).hexdigest()[:16]}"


def _tree(path):
    """Every entry under path (type, mode, owner, size, mtime, link target): one digest."""
    if not os.path.isdir(path):
        return _file(path)
    digest = hashlib.sha256()
    count = 0
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(dirs + files):
            full = os.path.join(root, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            link = os.readlink(full) if stat.S_ISLNK(st.st_mode) else ""
            size, mtime = (0, 0) if stat.S_ISDIR(st.st_mode) else (st.st_size, st.st_mtime_ns)
            rel = os.path.relpath(full, path)
            digest.update(f"{rel} {st.st_mode:o} {st.st_uid} {st.st_gid} {size} {mtime} {link}\n".encode())
            count += 1
    return f"tree of {count} entries {digest.hexdigest()[:16]}"


def _services(names):
    """name -> 'up|down enabled-state', from one systemctl call."""
    if not names:
        return {}
    out = subprocess.run(
        ["systemctl", "show", "--property=Id,ActiveState,UnitFileState", "--"]
        + [n if "." in n else n + ".service" for n in names],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        check=False,
    ).stdout
    blocks = [b for b in out.strip("\n").split("\n\n")]
    states = {}
    for name, block in zip(names, blocks):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        active = props.get("ActiveState", "unknown")
        # A unit on its way up or reloading is up; on its way down, down.
        up = "up" if active in ("active", "activating", "reloading") else "down"
        states[name] = "{} {}".format(up, props.get("UnitFileState") or "-")
    return states


def _nft_table(name):
    """The table's rules as nft lists them (no counters, no handles), or absent."""
    family, _, table = name.partition(" ")
    proc = subprocess.run(
        ["nft", "list", "table", family, table], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False
    )
    if proc.returncode != 0:
        return "absent"
    return f"loaded {hashlib.sha256(proc.stdout).hexdigest()[:16]}"


def _user(name):
    import grp
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return "absent"
    groups = sorted(g.gr_name for g in grp.getgrall() if name in g.gr_mem)
    return f"{entry.pw_uid}:{entry.pw_gid} {entry.pw_dir} {entry.pw_shell} groups {','.join(groups)}"


def _group(name):
    import grp

    try:
        return f"gid {grp.getgrnam(name).gr_gid}"
    except KeyError:
        return "absent"


def _packages():
    digest = hashlib.sha256()
    try:
        with open("/var/lib/dpkg/status", "rb") as handle:
            digest.update(handle.read())
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return f"dpkg status {digest.hexdigest()[:16]}"


def snapshot(resources):
    """'kind:name' -> its state now."""
    shot = {"host:name": socket.gethostname(), "host:packages": _packages()}
    mounts = _mounts()
    for path in resources.get("files", []):
        shot["file:" + path] = _file(path, mounts)
    for path in resources.get("trees", []):
        shot["tree:" + path] = _tree(path)
    for name, state in _services(list(resources.get("services", []))).items():
        shot["service:" + name] = state
    for name in resources.get("users", []):
        shot["user:" + name] = _user(name)
    for name in resources.get("groups", []):
        shot["group:" + name] = _group(name)
    for name in resources.get("nft_tables", []):
        shot["nft:" + name] = _nft_table(name)
    return shot


def _resources_of(shot):
    kinds = {
        "file": "files",
        "tree": "trees",
        "service": "services",
        "user": "users",
        "group": "groups",
        "nft": "nft_tables",
    }
    out = dict((k, []) for k in KINDS)
    for key in shot:
        kind, _, name = key.partition(":")
        if kind in kinds:
            out[kinds[kind]].append(name)
    return out


_DIGEST = re.compile(r"\b(sha256|loaded|dpkg status|entries) [0-9a-f]{16}")


def _difference(key, was, now):
    """One line; a digest is never shown (a record may cover a secret's file): only that it changed."""
    shown_was, shown_now = _DIGEST.sub(r"\1", was), _DIGEST.sub(r"\1", now)
    if shown_was == shown_now:
        return f"{key}: its content changed"
    return f"{key}: was {shown_was}, now {shown_now}"


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except FileNotFoundError:
        return None, "no record of a deploy that converged this node"
    except (OSError, ValueError) as exc:
        return None, f"its record is unreadable ({exc})"
    if (
        not isinstance(record, dict)
        or record.get("version") != RECORD_VERSION
        or not isinstance(record.get("snapshot"), dict)
    ):
        return None, "its record is of another podctl version"
    return record, None


def _write(path, record):
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, mode=0o755)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".converged.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", required=True, choices=["present", "verified", "absent"]),
            fingerprint=dict(type="str"),
            resources=dict(type="dict", default={}),
            path=dict(type="path", default="/var/lib/podctl/converged.json"),
        ),
        required_if=[("state", "present", ["fingerprint"]), ("state", "verified", ["fingerprint"])],
        supports_check_mode=True,
    )
    state, path = module.params["state"], module.params["path"]
    if state == "absent":
        exists = os.path.lexists(path)
        if exists and not module.check_mode:
            os.unlink(path)
        module.exit_json(changed=exists, converged=False, why=[], resources=0)
    if state == "present":
        resources = module.params["resources"] or {}
        unknown = sorted(set(resources) - set(KINDS))
        if unknown:
            module.fail_json(msg="unknown resource kind(s) {}; known: {}".format(", ".join(unknown), ", ".join(KINDS)))
        shot = snapshot(dict((k, sorted(set(v or []))) for k, v in resources.items()))
        record = {
            "version": RECORD_VERSION,
            "fingerprint": module.params["fingerprint"],
            "sealed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "snapshot": shot,
        }
        if not module.check_mode:
            _write(path, record)
        module.exit_json(changed=True, converged=True, why=[], resources=len(shot))
    record, problem = _read(path)
    if record is None:
        module.exit_json(changed=False, converged=False, why=[problem], resources=0, inputs_same=None)
    why = []
    inputs_same = record.get("fingerprint") == module.params["fingerprint"]
    if not inputs_same:
        why.append("the inputs changed since the last deploy that converged it (the site, podctl, or a file it copies)")
    now = snapshot(_resources_of(record["snapshot"]))
    for key, was in sorted(record["snapshot"].items()):
        if now.get(key) != was:
            why.append(_difference(key, was, now.get(key, "absent")))
    module.exit_json(
        changed=False,
        converged=not why,
        why=why[:SHOW_WHY] + (["..."] if len(why) > SHOW_WHY else []),
        resources=len(record["snapshot"]),
        sealed=record.get("sealed"),
        inputs_same=inputs_same,
    )


if __name__ == "__main__":
    main()

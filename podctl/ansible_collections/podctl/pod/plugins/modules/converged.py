#!/usr/bin/python
"""The node's record of the last deploy that converged it (podctl.runtime.converged drives it)."""

from __future__ import annotations

import hashlib
import hmac
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
  - Every digest in the record is keyed (HMAC-SHA256) with a key of the node's own, kept beside
    the record and root's alone, so the digest of a secret's file says nothing of the secret.
  - A tree is kept entry by entry (type, mode, owner, size, times, inode, link target): a file
    added, removed, edited in place or given to another owner anywhere under it is named.
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
    description: The run's inputs (podctl.runtime.converged.fingerprint); needed by present and verified.
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

RECORD_VERSION = 2
# Files up to this size are compared by content; larger ones (wheels) by size, mtime and ctime.
HASH_LIMIT = 1 << 20
SHOW_WHY = 20
# Entries of a changed tree named in one line of why.
SHOW_ENTRIES = 3
# A tree of at most this many entries is kept entry by entry (see _tree).
NAMED_ENTRIES = 2000
KINDS = ("files", "trees", "services", "users", "groups", "nft_tables")
KEY_FILE = "record.key"


class Keyed:
    """The node's digests: HMAC-SHA256 under the record's key, shortened to 16 hex digits."""

    def __init__(self, key):
        self.key = key

    def __call__(self, data):
        return hmac.new(self.key, data, hashlib.sha256).hexdigest()[:16]


def _key(folder, create):
    """The record's key (32 random bytes, root's alone, beside the record): made once by present."""
    path = os.path.join(folder, KEY_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        if not create:
            return None
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(os.urandom(32))
            handle.flush()
            os.fsync(handle.fileno())
        return _key(folder, create=False)
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise ValueError(f"{path} is not a file of root's alone")
        key = handle.read(64)
    if len(key) < 32:
        raise ValueError(f"{path} is too short to be a record's key")
    return key


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


def _file(path, keyed, mounts=None):
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
    return f"file {owner} sha256 {keyed(data)}"


def _tree(path, keyed):
    """(state, entries): every entry under path by relative path (the folder itself is "."), each
    by its type, mode, owner, size, mtime, ctime, inode and link target. ctime moves with every
    write, chmod, chown or rename, and no one but root can set it back: an edit that keeps a file's
    size and mtime is still seen, without reading every file of a large tree. A tree of at most
    NAMED_ENTRIES entries (a role's folder in /etc) is kept entry by entry, so a difference names
    the entry; a larger one (the validation tools' virtualenv, some 25,000) as one digest alone,
    which keeps the record small and its check as quick as it was."""
    if not os.path.isdir(path) or os.path.islink(path):
        return _file(path, keyed), {}
    lines = {".": _entry(path)}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            lines[os.path.relpath(full, path)] = _entry(full)
    ordered = sorted(lines.items())
    digest = keyed("".join(f"{rel}\0{line}\n" for rel, line in ordered).encode())
    entries = {rel: keyed(line.encode()) for rel, line in ordered} if len(ordered) <= NAMED_ENTRIES else {}
    return f"tree of {len(ordered)} entries {digest}", entries


def _entry(path):
    try:
        st = os.lstat(path)
    except OSError:
        return "gone"
    link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
    size, mtime = (0, 0) if stat.S_ISDIR(st.st_mode) else (st.st_size, st.st_mtime_ns)
    return f"{st.st_mode:o} {st.st_uid} {st.st_gid} {size} {mtime} {st.st_ctime_ns} {st.st_ino} {link}"


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


def _packages(keyed):
    try:
        with open("/var/lib/dpkg/status", "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return f"dpkg status {keyed(data)}"


def snapshot(resources, keyed):
    """('kind:name' -> its state now, tree path -> its entries)."""
    shot = {"host:name": socket.gethostname(), "host:packages": _packages(keyed)}
    trees = {}
    mounts = _mounts()
    for path in resources.get("files", []):
        shot["file:" + path] = _file(path, keyed, mounts)
    for path in resources.get("trees", []):
        shot["tree:" + path], trees[path] = _tree(path, keyed)
    for name, state in _services(list(resources.get("services", []))).items():
        shot["service:" + name] = state
    for name in resources.get("users", []):
        shot["user:" + name] = _user(name)
    for name in resources.get("groups", []):
        shot["group:" + name] = _group(name)
    for name in resources.get("nft_tables", []):
        shot["nft:" + name] = _nft_table(name)
    return shot, trees


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


def _difference(key, was, now, entries_was=None, entries_now=None):
    """One line; a digest is never shown (a record may cover a secret's file): only that it changed.
    A tree names its entries that were added, removed or changed (the first few)."""
    if entries_was and entries_now:
        named = [f"{rel} added" for rel in sorted(entries_now.keys() - entries_was.keys())]
        named += [f"{rel} removed" for rel in sorted(entries_was.keys() - entries_now.keys())]
        named += [
            f"{'the folder itself' if rel == '.' else rel} changed"
            for rel in sorted(entries_was.keys() & entries_now.keys())
            if entries_was[rel] != entries_now[rel]
        ]
        if named:
            more = f" (and {len(named) - SHOW_ENTRIES} more)" if len(named) > SHOW_ENTRIES else ""
            return f"{key}: {', '.join(named[:SHOW_ENTRIES])}{more}"
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
        or not isinstance(record.get("trees"), dict)
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
        folder = os.path.dirname(path)
        if not module.check_mode and not os.path.isdir(folder):
            os.makedirs(folder, mode=0o755)
        try:
            key = _key(folder, create=not module.check_mode) or os.urandom(32)
        except (OSError, ValueError) as exc:
            module.fail_json(msg=f"the record's key: {exc}")
        shot, trees = snapshot(dict((k, sorted(set(v or []))) for k, v in resources.items()), Keyed(key))
        record = {
            "version": RECORD_VERSION,
            "fingerprint": module.params["fingerprint"],
            "sealed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "snapshot": shot,
            "trees": trees,
        }
        if not module.check_mode:
            _write(path, record)
        module.exit_json(changed=True, converged=True, why=[], resources=len(shot))
    record, problem = _read(path)
    if record is not None:
        try:
            key = _key(os.path.dirname(path), create=False)
        except (OSError, ValueError) as exc:
            key, problem = None, f"its record's key is unusable ({exc})"
        if key is None:
            record, problem = None, problem or "its record's key is gone"
    if record is None:
        module.exit_json(changed=False, converged=False, why=[problem], resources=0, inputs_same=None)
    why = []
    inputs_same = record.get("fingerprint") == module.params["fingerprint"]
    if not inputs_same:
        why.append("the inputs changed since the last deploy that converged it (the site, podctl, or a file it copies)")
    now, trees = snapshot(_resources_of(record["snapshot"]), Keyed(key))
    for name, was in sorted(record["snapshot"].items()):
        if now.get(name) != was:
            tree = name.partition(":")[2] if name.startswith("tree:") else None
            entries_was = record["trees"].get(tree) if tree is not None else None
            why.append(_difference(name, was, now.get(name, "absent"), entries_was, trees.get(tree)))
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

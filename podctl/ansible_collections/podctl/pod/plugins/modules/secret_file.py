#!/usr/bin/python
"""A generated secret in a plain file of its own: made once, never followed through a link."""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import stat
import string

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.podctl.pod.plugins.module_utils.ownership import folder_problem

DOCUMENTATION = r"""
module: secret_file
short_description: Generate a secret once into a file, refusing a link or a foreign file in its place
description:
  - When I(path) is absent, writes a new random secret there (letters and digits, one line),
    through a temporary file in the same folder that is renamed into place, with the owner,
    group and mode given.
  - When I(path) exists, it must be a plain file with one link, owned by I(owner): it is kept
    (its owner's group and mode are set as given, on the open file), never read.
  - A symbolic link, a folder, a device or pipe, a file with other hard links or another owner in
    its place is refused, and so is a folder that anyone but root (or, for a file of the
    controller's user, that user) can write: the task fails naming it, and nothing is written.
  - The secret is never returned, so the task needs no C(no_log), and its path reaches the
    deploy's record like any file's.
options:
  path:
    description: The secret's file.
    type: path
    required: true
  owner:
    description: Its owner (default the user the module runs as).
    type: str
  group:
    description: Its group (default the owner's group).
    type: str
  mode:
    description: Its mode, octal.
    type: str
    default: "0600"
  length:
    description: Characters of a new secret.
    type: int
    default: 32
author: podctl
"""

EXAMPLES = r"""
- name: The database password, generated once
  podctl.pod.secret_file:
    path: /etc/podctl/secrets/slurmdbd-storage.pass
    owner: root
    mode: "0600"
  become: true
"""

RETURN = r"""
path:
  description: The secret's file.
  type: str
  returned: always
"""

ALPHABET = string.ascii_letters + string.digits


def _ids(owner, group):
    uid = pwd.getpwnam(owner).pw_uid if owner else os.geteuid()
    gid = grp.getgrnam(group).gr_gid if group else pwd.getpwuid(uid).pw_gid
    return uid, gid


def _existing_problem(path, st, uid):
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link (to {os.readlink(path)})"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a plain file (mode {stat.S_IFMT(st.st_mode):o})"
    if st.st_nlink != 1:
        return f"{path} has {st.st_nlink} hard links"
    if st.st_uid != uid:
        return f"{path} belongs to uid {st.st_uid}, not to uid {uid}"
    return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            owner=dict(type="str"),
            group=dict(type="str"),
            mode=dict(type="str", default="0600"),
            length=dict(type="int", default=32, no_log=False),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    try:
        uid, gid = _ids(module.params["owner"], module.params["group"])
        mode = int(module.params["mode"], 8)
    except (KeyError, ValueError) as exc:
        module.fail_json(msg=f"{path}: {exc}", path=path)
    if mode & ~0o7777 or mode & 0o007:
        module.fail_json(msg=f"{path}: mode {module.params['mode']} would let every user read the secret", path=path)
    folder = os.path.dirname(path) or "."
    refuse = "podctl writes and reads a secret only in a plain file of its own: remove it (and find out who put it there), then deploy again"
    try:
        problem = folder_problem(folder, os.lstat(folder), owners=(0, os.geteuid()))
    except OSError as exc:
        problem = f"{folder}: {exc.strerror}"
    if problem:
        module.fail_json(msg=f"{problem}: a secret's folder must be writable by root alone", path=path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        problem = _existing_problem(path, st, uid)
        if problem:
            module.fail_json(msg=f"{problem}: {refuse}", path=path)
        if (stat.S_IMODE(st.st_mode), st.st_gid) == (mode, gid):
            module.exit_json(changed=False, path=path)
        if not module.check_mode:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                os.fchown(fd, uid, gid)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        module.exit_json(changed=True, path=path)
    if module.check_mode:
        module.exit_json(changed=True, path=path)
    value = "".join(secrets.choice(ALPHABET) for _ in range(max(16, module.params["length"])))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.podctl-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
        os.write(fd, (value + "\n").encode())
        os.fsync(fd)
        os.close(fd)
        fd = -1
        # Linked, not renamed: a file that appeared at the path meanwhile is refused, not replaced.
        os.link(tmp, path)
    except FileExistsError:
        module.fail_json(msg=f"{path} appeared while the secret was written: {refuse}", path=path)
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(tmp)
    module.exit_json(changed=True, path=path)


if __name__ == "__main__":
    main()

#!/usr/bin/python
"""Folders root owns whole: only root can write in them, and the deploy's record keeps each as a tree."""

from __future__ import annotations

import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.podctl.pod.plugins.module_utils.ownership import folder_problem

DOCUMENTATION = r"""
module: root_tree
short_description: Check that only root can write a folder a role owns, and name it for the record
description:
  - Each folder in I(paths), every folder above it up to C(/), and every folder under it must be
    root's and writable by root alone (no group or other write bit). A file under it may belong
    to a daemon's account (a file that daemon must read, such as slurmdbd.conf), but no other
    account can add, remove or replace an entry anywhere in the tree.
  - A folder that fails is named, with its owner and mode, and the task fails: a role that
    writes what root runs or reads there must not go on.
  - The folders are returned as C(trees), which podctl's deploy record keeps entry by entry: a
    file added to, removed from or changed in such a folder makes the node differ from its record.
  - Changes nothing.
options:
  paths:
    description: The folders the role owns whole.
    type: list
    elements: path
    required: true
  absent_ok:
    description: Folders of I(paths) that may be missing (recorded as absent, so that one made later is a change).
    type: list
    elements: path
    default: []
author: podctl
"""

EXAMPLES = r"""
- name: Configure | folders the slurm role owns whole
  podctl.pod.root_tree:
    paths: [/etc/slurm, /etc/munge]
  become: true
"""

RETURN = r"""
trees:
  description: The folders checked (those of absent_ok that are missing included).
  type: list
  elements: str
  returned: always
"""

# Entries of a tree checked at most (a role's folder holds a handful; this bounds a hostile one).
MAX_ENTRIES = 100000


def problems(path):
    """Every folder above, at and under path that anyone but root could write in."""
    found = []
    above = os.path.dirname(path)
    while above and above != os.path.dirname(above):
        st = os.lstat(above)
        # A sticky /tmp above a folder lets no one rename that folder away.
        if not (above in ("/tmp", "/var/tmp") and st.st_mode & stat.S_ISVTX):
            problem = folder_problem(above, st)
            if problem:
                found.append(problem)
        above = os.path.dirname(above)
    problem = folder_problem(path, os.lstat(path))
    if problem:
        return found + [problem]
    seen = 0
    for root, dirs, files in os.walk(path):
        for name in dirs:
            full = os.path.join(root, name)
            st = os.lstat(full)
            if not stat.S_ISLNK(st.st_mode):
                problem = folder_problem(full, st)
                if problem:
                    found.append(problem)
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            found.append(f"{path} holds more than {MAX_ENTRIES} entries")
            break
    return found


def main():
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type="list", elements="path", required=True),
            absent_ok=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    paths = module.params["paths"]
    found = []
    for path in paths:
        if not os.path.isabs(path):
            found.append(f"{path} is not an absolute path")
        elif not os.path.lexists(path):
            if path not in module.params["absent_ok"]:
                found.append(f"{path} does not exist")
        else:
            found += problems(os.path.normpath(path))
    if found:
        module.fail_json(
            msg="only root may write where root runs or reads configuration: " + "; ".join(found[:10]),
            problems=found,
            trees=paths,
        )
    module.exit_json(changed=False, trees=paths)


if __name__ == "__main__":
    main()

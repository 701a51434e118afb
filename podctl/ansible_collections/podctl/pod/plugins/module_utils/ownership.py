"""Who may write a folder: the one check podctl's modules make before root trusts what is in it."""

from __future__ import annotations

import os
import stat


def folder_problem(path, st, owners=(0,)):
    """Why a folder (its lstat `st`) lets an account outside `owners` add, remove or replace what
    is in it (a link, not a folder, another owner, a group or other write bit), or None. The sticky
    /tmp and /var/tmp are no one's problem above a folder, only as one."""
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link (to {os.readlink(path)})"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    if st.st_uid not in owners:
        return f"{path} belongs to uid {st.st_uid}, not to root"
    if st.st_mode & 0o022:
        return f"{path} is writable by its group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None

"""podctl.pod.not_installed: the Debian packages of a list that the host does not have installed,
by the list read once at the start of each run (playbooks/packages.yml: dpkg-query, turned into
`podctl_installed_packages` by podctl.pod.dpkg_installed).

Every role asks apt for its packages only when one of them is missing: apt's own no-change answer
costs a second or more per host and task (it opens the package cache each time), and a deploy that
changes nothing ran seven of them. Without the list (a role run on its own) every package counts as
missing, and apt decides, as before.

    when: podctl_os_packages | podctl.pod.not_installed(podctl_installed_packages | default(none)) | length > 0
"""

from __future__ import annotations

from collections.abc import Sequence

from ansible.errors import AnsibleFilterError

# dpkg's abbreviated status of a package that is installed and configured: want install, state installed.
_INSTALLED = "ii"


def dpkg_installed(lines: Sequence[str]) -> list[str]:
    """The names of the installed packages, from `dpkg-query --show --showformat='${db:Status-Abbrev} ${Package}\\n'`."""
    if isinstance(lines, str) or not isinstance(lines, Sequence):
        raise AnsibleFilterError(f"dpkg_installed: give dpkg-query's lines, not {type(lines).__name__}")
    names = []
    for line in lines:
        fields = str(line).split()
        if len(fields) == 2 and fields[0] == _INSTALLED:
            names.append(fields[1])
    return sorted(set(names))


def not_installed(packages: Sequence[str], installed: Sequence[str] | None) -> list[str]:
    if isinstance(packages, str) or not isinstance(packages, Sequence):
        raise AnsibleFilterError(f"not_installed: give a list of package names, not {type(packages).__name__}")
    if isinstance(installed, str) or not isinstance(installed, Sequence):
        return list(packages)
    have = set(installed)
    # A name with a version or release (pkg=1.2, pkg/bookworm) is apt's to judge.
    return [p for p in packages if any(c in str(p) for c in "=/<>") or str(p) not in have]


class FilterModule:
    def filters(self) -> dict[str, object]:
        return {"not_installed": not_installed, "dpkg_installed": dpkg_installed}

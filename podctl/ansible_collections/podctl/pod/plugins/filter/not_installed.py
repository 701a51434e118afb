"""podctl.pod.not_installed: the Debian packages of a list that the host does not have installed,
by the package facts gathered once at the start of each stage (`ansible.builtin.package_facts`).

Every role asks apt for its packages only when one of them is missing: apt's own no-change answer
costs a second or more per host and task (it opens the package cache each time), and a deploy that
changes nothing ran seven of them. Without package facts (a role run on its own, a fact missing)
every package counts as missing, and apt decides, as before.

    when: podctl_os_packages | podctl.pod.not_installed(ansible_facts) | length > 0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError


def not_installed(packages: Sequence[str], facts: Mapping[str, object] | None) -> list[str]:
    if isinstance(packages, str) or not isinstance(packages, Sequence):
        raise AnsibleFilterError(f"not_installed: give a list of package names, not {type(packages).__name__}")
    installed = (facts or {}).get("packages") if isinstance(facts, Mapping) else None
    if not isinstance(installed, Mapping):
        return list(packages)
    # A name with a version or release (pkg=1.2, pkg/bookworm) is apt's to judge.
    return [p for p in packages if any(c in str(p) for c in "=/<>") or str(p) not in installed]


class FilterModule:
    def filters(self) -> dict[str, object]:
        return {"not_installed": not_installed}

"""Run the conformance suite against a deployed pod and judge it per host.

    run_conformance(site, inventory_dir, workdir, private_key) -> [CheckRun per host]

1. drift.check_drift runs the roles' `config` steps in check mode with diffs
   against every host: what Ansible would change is drift (a file names its
   first differing line). The roles are the one statement of what a node holds.
2. test_conformance.py runs in a pytest subprocess against every host of the
   inventory through testinfra's ansible backend (plain ssh, multiplexed),
   writing workdir/conformance.junit.xml: services, munge key, mounts, time,
   Slurm state.
3. Both become one envelope per host (validation/result.py's shape): each
   drifted file and each failed test line is a finding.

Workdir layout:
    drift/                            ansible-runner's private data dir for step 1
    ansible.cfg, pytest.ini           the settings the pytest subprocess runs with
    conformance.junit.xml, pytest.log step 2's results and output
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from podctl.core import assets, state
from podctl.core.errors import PodctlError
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import Site
from podctl.derive.inventory import controller_inputs
from podctl.runtime import converged
from podctl.runtime.ansible import (
    TESTINFRA_CONTROL_NAME,
    AnsibleSettings,
    ansible_settings,
    control_path_dir,
    refuse_templates,
    run_environment,
)
from podctl.validate.conformance.common import CHECK_NAME, CHECKS, DEFAULT_TIME_TOLERANCE_S, DRIFT, ENV_TIME_TOLERANCE
from podctl.validate.conformance.drift import HostDrift, check_drift
from podctl.validate.envelope import envelope, finding
from podctl.validate.judge import CheckRun

TEST_FILE = Path(__file__).resolve().parent / "test_conformance.py"
JUNIT_NAME = "conformance.junit.xml"
# The suite takes seconds; this only stops a node that hangs a command forever.
PYTEST_TIMEOUT_S = 900
# pytest's -v line for one test on one host. Bounded runs keep the search linear on any line
# (pytest also prints the nodes' file contents when a comparison fails).
_TEST_LINE = re.compile(r"::(test_\w{1,64})\[ansible://([^\]\s]{1,253})\] {1,8}(PASSED|FAILED|SKIPPED|ERROR)")
_TITLES = {c.test: c.title for c in (*CHECKS, DRIFT)}


class ConformanceError(PodctlError):
    pass


def run_conformance(
    site: Site,
    inventory_dir: Path,
    workdir: Path,
    private_key: Path | None,
    on_progress: Callable[[str], None] | None = None,
    vault_env: Mapping[str, str] | None = None,
    mitogen: bool = True,
    full_drift: bool = False,
) -> list[CheckRun]:
    """Certify that the pod in `inventory_dir` (podctl.derive.inventory.write_inventory of `site`)
    is configured as podctl would configure it now. One CheckRun per node of the site."""
    say = on_progress or (lambda _message: None)
    inventory_dir = Path(inventory_dir).resolve()
    workdir = Path(workdir).resolve()
    if not (inventory_dir / "hosts.yml").is_file():
        raise ConformanceError(
            f"{inventory_dir}: no hosts.yml; write the inventory first (podctl.derive.inventory.write_inventory)"
        )
    refuse_templates({"the report folder": workdir, "--private-key": private_key or ""})
    workdir.mkdir(parents=True, exist_ok=True)
    hosts = [n.hostname for n in site.nodes]
    settings = ansible_settings(
        hosts=len(hosts),
        fast=True,
        fact_cache_dir=workdir / "facts",
        roles_path=assets.roles_dir(),
        private_key=private_key,
        known_hosts=state.pod_known_hosts(site),
        emulated_nodes=len(site.nodes) if state.sim_pod(site) else 0,
        vault_env=vault_env,
        mitogen=mitogen,
    )

    started = time.monotonic()
    # A host whose record holds is as the last deploy that converged it left it, with the inputs
    # podctl has now: check mode would find nothing there. Only the others are checked.
    held: list[str] = []
    if not full_drift:
        verdicts = converged.verify(
            converged.Target(workdir / "records", inventory_dir, settings, hosts),
            converged.fingerprint(inventory_dir, controller_inputs(site), assets.STAGES, hosts),
        )
        held = [h for h in hosts if verdicts.hosts[h].converged]
        if verdicts.converged:
            say(
                f"every host is as the last deploy left it ({verdicts.resources} resources checked against "
                "their records): no drift"
            )
        else:
            say(
                f"{len(held)} of {len(hosts)} host(s) as their records say (no drift there); "
                "checking the others against the roles in check mode:"
            )
            for line in verdicts.summary():
                say("  " + line)
    drift = {h: HostDrift(tasks=1) for h in held}
    if len(held) < len(hosts):
        checked = [h for h in hosts if h not in drift]
        say(f"checking {fold_hostlist(checked)} against the roles in check mode (drift)")
        drift |= check_drift(inventory_dir, workdir, settings, checked, say, limited=bool(held))
        if not full_drift:
            _add_tree_changes(drift, verdicts)
    say(f"drift check done in {time.monotonic() - started:.1f} s")

    started = time.monotonic()
    say(f"running the conformance tests on {len(hosts)} host(s)")
    junit, problem = run_tests(inventory_dir, workdir, settings, private_key, say)
    runs = parse_junit(junit.read_text(encoding="utf-8") if junit.is_file() else "", hosts, problem, drift)
    failed = [r.node for r in runs if r.status != "pass"]
    say(
        f"conformance tests done in {time.monotonic() - started:.1f} s: "
        + (f"{len(failed)} host(s) not conforming: {', '.join(failed)}" if failed else "every host conforms")
    )
    return runs


def _add_tree_changes(drift: dict[str, HostDrift], verdicts: converged.Verdicts) -> None:
    """A folder podctl owns whole (its record keeps it as a tree) that gained, lost or changed an
    entry since the deploy that converged the host: drift, even where check mode finds nothing to
    change (no role task removes a file it never wrote, such as one dropped into
    plugstack.conf.d). Only on a host whose record was made by the inputs podctl has now: with
    other inputs, the roles in check mode are the judge."""
    for host, verdict in verdicts.hosts.items():
        if host in drift and verdict.inputs_same:
            drift[host].findings += [
                f"{why.removeprefix('tree:')} since the last deploy that converged this host"
                for why in verdict.why
                if why.startswith("tree:")
            ]


def ssh_args(settings: AnsibleSettings) -> str:
    """The deploy's SSH options, plus a ControlPath (testinfra multiplexes only with
    one: without it every command of every test would be a fresh SSH handshake)
    and BatchMode (an unknown host key or a password prompt fails the host
    instead of waiting for an answer nobody gives)."""
    return (
        settings.envvars["ANSIBLE_SSH_ARGS"]
        + f" -o ControlPath={control_path_dir()}/{TESTINFRA_CONTROL_NAME} -o BatchMode=yes"
    )


def run_tests(
    inventory_dir: Path, workdir: Path, settings: AnsibleSettings, private_key: Path | None, say: Callable[[str], None]
) -> tuple[Path, str | None]:
    """Run test_conformance.py; returns the JUnit file and, if pytest did not finish, why."""
    junit = workdir / JUNIT_NAME
    junit.unlink(missing_ok=True)
    # testinfra's ssh backend reads ssh_args from ansible.cfg, not from
    # ANSIBLE_SSH_ARGS, and the key from --ssh-identity-file (or the
    # inventory's ansible_ssh_private_key_file), not ANSIBLE_PRIVATE_KEY_FILE.
    # configparser interpolates '%': write '%%'.
    (workdir / "ansible.cfg").write_text(
        "# Written by podctl validate (conformance) for testinfra.\n[ssh_connection]\n"
        f"ssh_args = {ssh_args(settings).replace('%', '%%')}\n",
        encoding="utf-8",
    )
    # Its own ini file keeps the repository's pytest configuration and conftest out.
    (workdir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = dict(os.environ)
    env.update(run_environment(settings))
    env.update(
        {
            "ANSIBLE_CONFIG": str(workdir / "ansible.cfg"),
            ENV_TIME_TOLERANCE: env.get(ENV_TIME_TOLERANCE) or str(DEFAULT_TIME_TOLERANCE_S),
            # Only testinfra's plugin: the others installed here cost seconds to import.
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            # No assertion-rewrite cache next to the installed test file.
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "testinfra.plugin",
        "-c",
        str(workdir / "pytest.ini"),
        "--rootdir",
        str(workdir),
        "-v",
        "--color=no",
        f"--junitxml={junit}",
        "-o",
        "junit_family=xunit2",
        "--hosts=ansible://all",
        f"--ansible-inventory={inventory_dir}",
    ]
    if private_key is not None:
        cmd.append(f"--ssh-identity-file={private_key}")
    cmd.append(str(TEST_FILE))
    log = workdir / "pytest.log"
    problem: str | None = None
    deadline = time.monotonic() + PYTEST_TIMEOUT_S
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            match = _TEST_LINE.search(line)
            if match:
                test, host, outcome = match.groups()
                if outcome.upper() != "PASSED":  # a pass is news only in the summary
                    say(f"{host}: {_TITLES.get(test, test)} {outcome.lower()}")
            if time.monotonic() > deadline:
                proc.kill()
                problem = f"the tests did not finish within {PYTEST_TIMEOUT_S} s"
                break
        rc = proc.wait()
    # pytest: 0 all passed, 1 some failed; anything else means it did not run them all.
    if problem is None and rc not in (0, 1):
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-8:])
        problem = f"pytest exited {rc}: {tail}"
    return junit, problem


def _host_of(name: str) -> tuple[str, str] | None:
    match = re.fullmatch(r"(test_\w{1,64})\[ansible://([^\]\s]{1,253})\]", name)
    return (match.group(1), match.group(2)) if match else None


def parse_junit(
    xml_text: str, hosts: list[str], problem: str | None = None, drift: dict[str, HostDrift] | None = None
) -> list[CheckRun]:
    """One CheckRun per host in `hosts` from test_conformance.py's JUnit XML and the drift check.

    A failed test (pytest.fail) gives one finding per line of its message; a
    test that raised, or a host with no results, makes the host "error"; a
    host that cannot be reached is "error" with that reason alone. A host's
    drift is one more result, failed with a finding per file or task.
    """
    cases: dict[str, list[dict[str, Any]]] = {h: [] for h in hosts}
    if xml_text.strip():
        root = ET.fromstring(xml_text)
        for case in root.iter("testcase"):
            parsed = _host_of(case.get("name", ""))
            if parsed is None:
                continue
            test, host = parsed
            outcome, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                    message = child.get("message") or (child.text or "")
                    break
            if outcome == "failed" and not message.startswith("Failed: "):
                outcome = "error"  # the test raised: the check broke, it did not find a problem
            elif outcome == "failed":
                message = message[len("Failed: ") :]
            cases.setdefault(host, []).append(
                {"test": test, "outcome": outcome, "message": message, "duration_s": float(case.get("time") or 0.0)}
            )
    for host, found in (drift or {}).items():
        if host in cases and cases[host]:
            outcome = "error" if found.problem else ("failed" if found.findings else "passed")
            message = found.problem or "\n".join(found.findings)
            cases[host].append(
                {
                    "test": DRIFT.test,
                    "outcome": outcome,
                    "message": message,
                    "duration_s": 0.0,
                    "raw": outcome == "error",
                }
            )
    runs = []
    for host, results in cases.items():
        runs.append(CheckRun(check=CHECK_NAME, scope="node", node=host, envelope=_envelope(host, results, problem)))
    return runs


def _envelope(host: str, results: list[dict[str, Any]], problem: str | None) -> dict[str, Any]:
    findings: list[dict[str, Any]] = []
    status = "pass"
    reach = next((r for r in results if r["test"] == "test_reachable"), None)
    if not results:
        status = "error"
        findings.append(finding(f"the conformance tests did not run on {host}" + (f": {problem}" if problem else "")))
    elif reach is not None and reach["outcome"] != "passed":
        status = "error"
        findings.append(finding(reach["message"] or f"{host} cannot be reached over SSH"))
    else:
        for r in results:
            if r["outcome"] == "failed":
                status = "fail" if status == "pass" else status
                findings.extend(finding(line) for line in r["message"].splitlines() if line.strip())
            elif r["outcome"] == "error":
                status = "error"
                first = (r["message"].strip().splitlines() or ["no message"])[0]
                what = _TITLES.get(r["test"], r["test"])
                findings.append(
                    finding(f"{what}: {first}" if r.get("raw") else f"conformance test {what} broke: {first}")
                )
        if problem and status == "pass" and len([r for r in results if r["test"] != DRIFT.test]) < len(CHECKS):
            status = "error"
            findings.append(finding(f"not every conformance test ran: {problem}"))
    tests = [
        {
            "name": r["test"],
            "title": _TITLES.get(r["test"], r["test"]),
            "outcome": r["outcome"],
            **({"message": r["message"]} if r["message"] else {}),
            "duration_s": round(r["duration_s"], 3),
        }
        for r in results
    ]
    return envelope(
        CHECK_NAME,
        host,
        status,
        findings,
        details={"tests": tests},
        duration_s=round(sum(r["duration_s"] for r in results), 3),
    )

"""podctl.pod.bcrypt_hash: a password's bcrypt hash, for the `basic_auth_users` of the web config
that Prometheus and Alertmanager read (their only accepted hash).

Ansible's own password_hash filter needs passlib, which podctl does not install; the bcrypt module
comes with paramiko, which podctl's deploy needs, and runs here, on the controller: the clear
password never goes to a node for hashing.

The salt is derived from the password, so a password hashes the same on every run and a deploy
that changes nothing rewrites nothing. That costs no strength here: the salt only has to differ
between passwords, and these are 32 random characters that the monitoring role generates.
"""

from __future__ import annotations

import base64
import hashlib

from ansible.errors import AnsibleFilterError

try:
    import bcrypt
except ImportError:  # reported when the filter is used, not when Ansible loads the plugin
    bcrypt = None

COST = 10
_BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_BCRYPT64 = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_SALT_CONTEXT = b"podctl.pod.bcrypt_hash salt\0"
MAX_BYTES = 72  # bcrypt reads no further


def bcrypt_hash(password: object, cost: int = COST) -> str:
    if bcrypt is None:
        raise AnsibleFilterError("bcrypt_hash: the bcrypt module is not installed beside Ansible (pip install bcrypt)")
    if not isinstance(password, str) or not password:
        raise AnsibleFilterError("bcrypt_hash: the password must be a non-empty string")
    secret = password.encode()
    if len(secret) > MAX_BYTES:
        raise AnsibleFilterError(f"bcrypt_hash: the password is longer than bcrypt's {MAX_BYTES} bytes")
    if not isinstance(cost, int) or not 4 <= cost <= 31:
        raise AnsibleFilterError(f"bcrypt_hash: cost {cost!r} is not an integer from 4 to 31")
    # 16 bytes in bcrypt's base64: 22 characters whose last one carries no stray bits.
    raw = hashlib.sha256(_SALT_CONTEXT + secret).digest()[:16]
    salt = base64.b64encode(raw).decode().rstrip("=").translate(str.maketrans(_BASE64, _BCRYPT64))
    return bcrypt.hashpw(secret, f"$2b${cost:02d}${salt}".encode()).decode()


class FilterModule:
    def filters(self) -> dict[str, object]:
        return {"bcrypt_hash": bcrypt_hash}

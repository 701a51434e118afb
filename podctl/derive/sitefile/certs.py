"""Whether a site's certificate and key can serve TLS for a name, as Prometheus's clients will check it.

A handshake in memory, with Python's own TLS: the server side loads the key and the certificate (a
key that does not match, an encrypted key or a file that is not PEM fails here); the client trusts
exactly that certificate (pinned, as podctl status and Prometheus trust it: the file is their CA)
and checks the name against its subject alternative names, never its common name (Go ignores it).
An expired certificate fails as it would for those clients.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from pathlib import Path

_HOSTNAME_MISMATCH = 62  # OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH
_ROUNDS = 8  # a TLS 1.3 handshake completes in two; more is a handshake that will not


def certificate_serves(cert: Path, key: Path, names: Sequence[str]) -> tuple[str | None, str | None]:
    """(the first of `names` the certificate serves, None), or (None, why it serves none of them)."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        # An encrypted key asks for a passphrase: answer none, so that it fails instead of prompting.
        server.load_cert_chain(str(cert), str(key), password=lambda: b"")
    except (OSError, ssl.SSLError, ValueError) as exc:  # ValueError: a path with a NUL in it
        return None, f"the certificate and key do not load as a pair ({_why(exc)})"
    problems = []
    for name in names:
        client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client.hostname_checks_common_name = False
        client.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        try:
            client.load_verify_locations(cafile=str(cert))
        except (OSError, ssl.SSLError, ValueError) as exc:
            return None, f"the certificate does not load ({_why(exc)})"
        c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
        pipes = _Pipes(c_out, s_in, s_out, c_in)
        c = client.wrap_bio(c_in, c_out, server_hostname=name)
        s = server.wrap_bio(s_in, s_out, server_side=True)
        try:
            pipes.run(c, s)
            return name, None
        except ssl.SSLCertVerificationError as exc:
            mismatch = exc.verify_code == _HOSTNAME_MISMATCH
            problems.append("its subject alternative names hold none of them" if mismatch else exc.verify_message)
        except ssl.SSLError as exc:
            problems.append(_why(exc))
    return None, "; ".join(dict.fromkeys(problems))


class _Pipes:
    """Carries what each side of an in-memory handshake writes to the other."""

    def __init__(self, c_out: ssl.MemoryBIO, s_in: ssl.MemoryBIO, s_out: ssl.MemoryBIO, c_in: ssl.MemoryBIO) -> None:
        self.c_out, self.s_in, self.s_out, self.c_in = c_out, s_in, s_out, c_in

    def run(self, client: ssl.SSLObject, server: ssl.SSLObject) -> None:
        done = {"client": False, "server": False}
        for _ in range(_ROUNDS):
            for side, obj in (("client", client), ("server", server)):
                if not done[side]:
                    try:
                        obj.do_handshake()
                        done[side] = True
                    except ssl.SSLWantReadError:
                        pass
                self.s_in.write(self.c_out.read())
                self.c_in.write(self.s_out.read())
            if all(done.values()):
                return
        raise ssl.SSLError("the TLS handshake did not complete")


def _why(exc: Exception) -> str:
    if isinstance(exc, ssl.SSLError):
        if exc.reason:
            return str(exc.reason).lower().replace("_", " ")
        return "not PEM, or the key is encrypted"
    return getattr(exc, "strerror", None) or str(exc)

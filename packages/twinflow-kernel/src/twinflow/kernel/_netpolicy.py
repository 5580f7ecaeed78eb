"""The network kill switch: which hosts a real adapter may reach."""

from __future__ import annotations

import ipaddress
import os
import socket
import sys

ENV_ALLOW_NETWORK = "TWINFLOW_ALLOW_NETWORK"


def is_loopback(host: str) -> bool:
    """Tell whether `host` is a loopback name or address (no DNS lookup is made)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def under_test() -> bool:
    """Tell whether this process runs under pytest."""
    return "pytest" in sys.modules or "PYTEST_CURRENT_TEST" in os.environ


def network_allowed(explicit: bool | None) -> bool:
    """Decide whether non-loopback hosts may be reached.

    An explicit argument wins; otherwise `TWINFLOW_ALLOW_NETWORK` (`1` allows, `0` refuses);
    otherwise the network is allowed, except under pytest, where it is refused.
    """
    if explicit is not None:
        return explicit
    env = os.environ.get(ENV_ALLOW_NETWORK)
    if env is not None and env.strip() != "":
        return env.strip() == "1"
    return not under_test()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago.

    The port is released before returning, so another process could take it first; callers that
    start a server on it (such as `SubprocessLauncher`) see that as a launch failure, not a hang.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port

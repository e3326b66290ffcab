"""The HAProxy configuration of a class server: a pure function of its settings.

Learners reach one address; HAProxy hands each browser to one Streamlit worker and keeps it there by a cookie it
inserts, never by client address (a school's network puts the whole room behind one address, and a Streamlit
session lives in one process). Health checks and redispatch move a browser off a dead worker; a long tunnel
timeout keeps a websocket open through a quiet lesson; with a certificate the proxy terminates TLS, so a passcode
typed over a school's Wi-Fi never travels in clear text. Every value written into the file is checked first: a
number, an IPv4 address, or a path refused when it holds a character the configuration language would read.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

COOKIE = "LABWORKER"
WORKER_HEADER = "X-Lab-Worker"
HEALTH_PATH = "/_stcore/health"
MAX_WORKERS = 32
# A path HAProxy reads back unchanged inside double quotes: no quote, backslash, '#', '$' or control character.
_SAFE_PATH = re.compile(r"[^\"\\#$\x00-\x1f\x7f]{1,1000}")


def worker_name(index: int) -> str:
    """w1, w2, ...: the server name in the configuration, the cookie's value and the X-Lab-Worker header."""
    return f"w{index + 1}"


@dataclass(frozen=True)
class ProxySettings:
    address: str  # the IPv4 address learners connect to; 0.0.0.0 = every address of the machine
    port: int  # the port learners connect to (https when tls_cert is set)
    worker_ports: tuple[int, ...]  # one Streamlit worker per port, on 127.0.0.1
    tls_cert: Path | None = None  # a PEM with certificate and key: terminate TLS on `port`
    http_port: int | None = None  # with TLS only: a plain-HTTP port that redirects to https://host:port

    def __post_init__(self):
        try:
            ipaddress.IPv4Address(self.address)
        except ValueError:
            raise ValueError(
                f"--address must be an IPv4 address such as 0.0.0.0 or 192.168.1.20, got {self.address[:60]!r}"
            ) from None
        ports = [self.port, *self.worker_ports, *([self.http_port] if self.http_port is not None else [])]
        bad = [p for p in ports if not (isinstance(p, int) and 1 <= p <= 65535)]
        if bad:
            raise ValueError(f"ports must be whole numbers from 1 to 65535, got {bad}")
        if len(set(ports)) != len(ports):
            raise ValueError(f"the proxy's and the workers' ports must all differ, got {ports}")
        if not 1 <= len(self.worker_ports) <= MAX_WORKERS:
            raise ValueError(f"a class server has 1 to {MAX_WORKERS} workers, got {len(self.worker_ports)}")
        if self.tls_cert is not None and not _SAFE_PATH.fullmatch(str(self.tls_cert)):
            raise ValueError("LAB_TLS_CERT holds a character HAProxy cannot read in a path (quote, '#', '$', ...)")
        if self.http_port is not None and self.tls_cert is None:
            raise ValueError("a redirecting HTTP port makes sense only with TLS (set LAB_TLS_CERT)")

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert is not None else "http"


def haproxy_config(settings: ProxySettings) -> str:
    """The whole configuration file for `settings`; `haproxy -c -f FILE` accepts it."""
    tls = settings.tls_cert is not None
    bind = f"    bind {settings.address}:{settings.port}"
    frontend = [bind + (f' ssl crt "{settings.tls_cert}"' if tls else "")]
    if settings.http_port is not None:
        # Plain HTTP on its own port only redirects: to the same host name, on the https port, with the same path.
        host_port = "" if settings.port == 443 else f":{settings.port}"
        frontend += [
            f"    bind {settings.address}:{settings.http_port}",
            f"    http-request redirect prefix https://%[req.hdr(host),field(1,:)]{host_port} code 301 "
            "unless { ssl_fc }",
        ]
    servers = [
        f"    server {worker_name(i)} 127.0.0.1:{port} check cookie {worker_name(i)}"
        for i, port in enumerate(settings.worker_ports)
    ]
    lines = [
        "# Written by `python -m core serve --class` (cli/haproxy.py) at each start: change its settings, not the file",
        "global",
        "    log stderr format raw local0 notice  # workers going down and up; not every request",
        "    maxconn 4000",
        *(["    tune.ssl.default-dh-param 2048"] if tls else []),
        "",
        "defaults",
        "    mode http",
        "    log global",
        "    option dontlognull",
        "    timeout connect 5s",
        "    timeout client 1m",
        "    timeout server 5m  # a page's script run may take a while on a busy worker",
        "    timeout http-request 15s",
        "    timeout http-keep-alive 15s",
        "    timeout queue 1m",
        "    timeout check 5s",
        "    timeout tunnel 1h  # a learner's websocket, once upgraded, through a quiet lesson",
        "    timeout client-fin 30s",
        "",
        "frontend lab",
        *frontend,
        "    default_backend workers",
        "",
        "backend workers",
        "    balance leastconn  # a new browser goes to the worker with the fewest open connections (websockets)",
        f"    cookie {COOKIE} insert indirect nocache httponly" + (" secure" if tls else ""),
        f"    option httpchk GET {HEALTH_PATH}",
        # A browser pinned to a dead worker is sent to a live one at once: redispatch on every retry (1), not only on
        # the last, which would first wait for the dead one for about a second per retry.
        "    option redispatch 1",
        "    retries 2",
        # A worker killed with idle keep-alive connections open: a request sent on one gets no answer at all; it is
        # sent again (on a new connection, to a live worker) instead of failing with 502.
        "    retry-on conn-failure empty-response",
        f"    http-response set-header {WORKER_HEADER} %s",
        "    default-server inter 2s fall 2 rise 1",
        *servers,
        "",
    ]
    return "\n".join(lines)

"""Where the feed listens and how it is protected: ``--serve [HOST:]PORT``, ``--serve-config FILE``
and ``--serve-insecure``.

``FILE`` is the web configuration file of the Prometheus exporters (the exporter-toolkit's format,
described in its own documentation), so one file serves dptop and the node exporter alike::

    tls_server_config:
      cert_file: server.crt        # relative paths are read beside FILE
      key_file: server.key
      client_ca_file: ca.crt       # with client_auth_type
      client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven, NoClientCert
      min_version: TLS12           # or TLS13
    basic_auth_users:
      prometheus: $2y$10$...       # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\\n')

Keys dptop does not implement are refused, not ignored. A HOST that is not loopback needs
``FILE`` or an explicit ``--serve-insecure``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import ipaddress
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"
CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
TLS_KEYS = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version"}


def parse_serve(text: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` (``[v6]:PORT``) -> (host, port); host defaults to loopback."""
    host, sep, port = text.rpartition(":")
    if sep and host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif not sep:
        host = LOOPBACK
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535 or (sep and not host) or "[" in host or "]" in host:
        raise ValueError(f"--serve ({text!r}) must be PORT or HOST:PORT ([v6]:PORT) with a port in [0, 65535]")
    return host, number


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class WebConfig:
    """A checked ``--serve-config`` file: TLS files (absolute paths) and bcrypt-hashed users."""

    source: str
    cert_file: str | None = None
    key_file: str | None = None
    client_ca_file: str | None = None
    client_auth: str = "NoClientCert"
    min_version: str = "TLS12"
    users: dict = field(default_factory=dict)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server's TLS context, or None without ``tls_server_config``."""
        if self.cert_file is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = VERSIONS[self.min_version]
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
            if self.client_ca_file is not None:
                context.load_verify_locations(cafile=self.client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"--serve-config {self.source}: cannot load the TLS files: {exc}") from None
        context.verify_mode = CLIENT_AUTH[self.client_auth]
        return context

    def authorizer(self):
        """``(user, password) -> bool`` against the bcrypt hashes; a right pair is remembered (by
        its SHA-256) so a scraper costs one bcrypt check per process, and checks run one at a time."""
        import bcrypt

        hashes = {user: h.encode() for user, h in self.users.items()}
        known: set = set()
        lock = threading.Lock()

        def authorize(user: str, password: str) -> bool:
            digest = hashlib.sha256(f"{user}\0{password}".encode()).digest()
            if digest in known:
                return True
            stored = hashes.get(user)
            with lock:
                ok = stored is not None and bcrypt.checkpw(password.encode(), stored)
            if ok:
                known.add(digest)
            return ok

        return authorize


def needs(module: str, what: str) -> None:
    """One line naming the ``feed`` extra when ``module`` (PyYAML, bcrypt) is missing."""
    if importlib.util.find_spec(module) is None:
        raise ValueError(f"{what} needs {module}, not installed here: pip install 'dptop[feed]'")


def read_web_config(path: str) -> WebConfig:
    """Read and check ``path`` (see the module docstring); one ``ValueError`` line if it is wrong."""
    where = f"--serve-config {path}"
    needs("yaml", where)
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{where}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: not YAML: {' '.join(str(exc).split())}") from None
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: must be a mapping (tls_server_config, basic_auth_users)")
    unknown = set(doc) - {"tls_server_config", "basic_auth_users"}
    if unknown:
        raise ValueError(f"{where}: dptop does not implement {', '.join(sorted(map(str, unknown)))}")
    folder = Path(path).resolve().parent
    tls, users = doc.get("tls_server_config") or {}, doc.get("basic_auth_users") or {}
    if not isinstance(tls, dict) or not isinstance(users, dict):
        raise ValueError(f"{where}: tls_server_config and basic_auth_users must be mappings")
    if set(tls) - TLS_KEYS:
        raise ValueError(f"{where}: tls_server_config: dptop does not implement "
                         f"{', '.join(sorted(map(str, set(tls) - TLS_KEYS)))}")
    files = {k: str(folder / str(tls[k])) for k in ("cert_file", "key_file", "client_ca_file") if tls.get(k)}
    if tls and not ("cert_file" in files and "key_file" in files):
        raise ValueError(f"{where}: tls_server_config needs cert_file and key_file")
    auth = str(tls.get("client_auth_type") or "NoClientCert")
    if auth not in CLIENT_AUTH:
        raise ValueError(f"{where}: client_auth_type {auth!r}: one of {', '.join(CLIENT_AUTH)}")
    if ("client_ca_file" in files) != (auth != "NoClientCert"):
        raise ValueError(f"{where}: client_ca_file and a client_auth_type other than NoClientCert go together")
    version = str(tls.get("min_version") or "TLS12")
    if version not in VERSIONS:
        raise ValueError(f"{where}: min_version {version!r}: one of {', '.join(VERSIONS)}")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise ValueError(f"{where}: basic_auth_users: {user}: not a bcrypt hash")
    if users:
        needs("bcrypt", "basic_auth_users")
    config = WebConfig(path, files.get("cert_file"), files.get("key_file"), files.get("client_ca_file"), auth,
                       version, {str(u): h for u, h in users.items()})
    config.ssl_context()  # the files are read now: a wrong one is a usage error before the run
    return config


@dataclass(frozen=True)
class ServeSpec:
    """Where and how the feed serves: ``--serve``, with ``--serve-config`` and ``--serve-insecure``."""

    host: str
    port: int
    config: WebConfig | None = None
    insecure: bool = False


def serve_spec(where: str, config_path: str | None, insecure: bool) -> ServeSpec:
    """The checked ``--serve*`` options; a HOST beyond loopback without ``--serve-config`` is
    refused unless ``--serve-insecure`` says so."""
    host, port = parse_serve(where)
    config = None if config_path is None else read_web_config(config_path)
    if not is_loopback(host) and (config is None or config.cert_file is None) and not insecure:
        raise ValueError(f"--serve {where}: a host beyond loopback needs --serve-config FILE with "
                         f"tls_server_config (TLS, basic auth), or --serve-insecure to serve in the clear")
    return ServeSpec(host, port, config, insecure)

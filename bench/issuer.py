"""A throw-away OpenID Connect issuer for the JWT runs (`run.py --jwt`): its discovery document and JWKS
as two files, served by the standard library's http.server behind the TLS proxy (so that the function pays
for a TLS handshake with the issuer, as on AWS), and an RS256 access token it signed."""

import contextlib
import json
import pathlib
import socket
import subprocess
import sys
import time

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from ddb import pick_free_port
from emulator import stop
from proxy import Proxy

AUDIENCE = "https://plants.example"
KID = "bench-1"
TOKEN_LIFETIME_S = 24 * 3600  # outlives any run


class Issuer(contextlib.ExitStack):
    """Serves `/.well-known/openid-configuration` and `/jwks.json` at
    `https://localhost:PORT` (the proxy's certificate), as Amazon Cognito
    does: both on one host, over one kept-alive connection, with no
    `Cache-Control` (the function keeps the keys for its default ten
    minutes). A fresh RSA 2048 key per run."""

    def __init__(self, folder, certs):
        super().__init__()
        self.folder, self.certs = pathlib.Path(folder), certs

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def start(self):
        documents = self.folder / "documents"
        (documents / ".well-known").mkdir(parents=True, exist_ok=True)
        port = pick_free_port()
        with open(self.folder / "issuer.log", "wb") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "http.server", "--protocol", "HTTP/1.1", "--bind", "127.0.0.1"]
                + ["--directory", str(documents), str(port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.callback(stop, server)
        self.proxy = self.enter_context(Proxy(port, str(self.folder / "issuer-tls.log"), self.certs))
        self.url = self.proxy.endpoint
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
        discovery = {"issuer": self.url, "jwks_uri": f"{self.url}/jwks.json"}
        (documents / ".well-known" / "openid-configuration").write_text(json.dumps(discovery))
        (documents / "jwks.json").write_text(json.dumps({"keys": [jwk | {"use": "sig", "alg": "RS256", "kid": KID}]}))
        now = int(time.time())
        claims = {"iss": self.url, "sub": "bench", "aud": AUDIENCE, "scope": "plants:write"}
        claims |= {"iat": now, "nbf": now, "exp": now + TOKEN_LIFETIME_S}
        self.token = jwt.encode(claims, key, algorithm="RS256", headers={"typ": "at+jwt", "kid": KID})
        _wait_for(port, server)

    def environment(self):
        """What turns JWT verification on in a function, with this issuer."""
        return {"PLANTS_JWT_ISSUER": self.url, "PLANTS_JWT_AUDIENCE": AUDIENCE}


def _wait_for(port, server, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("error: the issuer's http.server exited at start")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise SystemExit(f"error: the issuer's http.server did not listen on port {port} within {timeout_s} s")

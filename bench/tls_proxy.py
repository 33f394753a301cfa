"""HTTPS in front of DynamoDB Local, so that the functions pay for TLS as
they do on AWS: a throwaway certificate authority made at run time with the
`openssl` command, a server certificate for `localhost`, and a small TLS
terminating proxy (asyncio, in a process of its own so that it never
competes with the emulator for the GIL).

As a module: `make_certificates()` and `TlsProxy`. As a script: the proxy.
"""

import argparse
import asyncio
import glob
import os
import shutil
import socket
import ssl
import subprocess
import sys

SYSTEM_BUNDLE_CANDIDATES = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
]
SYSTEM_CERT_DIR_CANDIDATES = ["/etc/ssl/certs", "/etc/pki/tls/certs"]


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_certificates(workdir):
    """A CA and a `localhost` server certificate signed by it (RSA 2048, as
    DynamoDB's own endpoints use), plus the trust material each runtime
    reads:

    - `ca.pem`: the CA alone (Node adds it to its built-in roots through
      `NODE_EXTRA_CA_CERTS`);
    - `bundle.pem`: the system's CA bundle plus the CA, one file, as Amazon
      Linux 2023 has it (`SSL_CERT_FILE` for Rust, `AWS_CA_BUNDLE` for
      boto3, which otherwise reads certifi's bundle of the same size);
    - `certdir/`: the system's certificate directory (every file, hash links
      included) plus the CA, for measuring the cost of a directory scan
      (`SSL_CERT_DIR`).
    """
    if shutil.which("openssl") is None:
        raise SystemExit("error: the openssl command is needed for the HTTPS runs (apt-get install openssl)")
    os.makedirs(workdir, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=plant-store bench CA (throwaway)",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=workdir,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost",
        cwd=workdir,
    )  # fmt: skip
    with open(os.path.join(workdir, "server.ext"), "w") as ext:
        ext.write(
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
        )
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
        cwd=workdir,
    )  # fmt: skip

    ca = open(os.path.join(workdir, "ca.pem")).read()
    system_bundle = next((p for p in SYSTEM_BUNDLE_CANDIDATES if os.path.isfile(p)), None)
    system_pem = open(system_bundle).read() if system_bundle else ""
    with open(os.path.join(workdir, "bundle.pem"), "w") as bundle:
        bundle.write(system_pem.rstrip("\n") + "\n" + ca)

    certdir = os.path.join(workdir, "certdir")
    os.makedirs(certdir, exist_ok=True)
    system_dir = next((d for d in SYSTEM_CERT_DIR_CANDIDATES if os.path.isdir(d)), None)
    dir_files = 0
    if system_dir:
        for path in glob.glob(os.path.join(system_dir, "*")):
            os.symlink(os.path.realpath(path), os.path.join(certdir, os.path.basename(path)))
            dir_files += 1
    shutil.copy(os.path.join(workdir, "ca.pem"), os.path.join(certdir, "plant-store-bench-ca.pem"))
    return {
        "dir": workdir,
        "ca": os.path.join(workdir, "ca.pem"),
        "bundle": os.path.join(workdir, "bundle.pem"),
        "bundle_certs": (system_pem + ca).count("BEGIN CERTIFICATE"),
        "certdir": certdir,
        "certdir_files": dir_files + 1,
        "cert": os.path.join(workdir, "server.pem"),
        "key": os.path.join(workdir, "server.key"),
    }


class TlsProxy:
    """Runs this file as a script on a free port; stopped on exit."""

    def __init__(self, certs, upstream_port, log_path):
        self.certs, self.upstream_port, self.log_path = certs, upstream_port, log_path

    def __enter__(self):
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--cert", self.certs["cert"], "--key",
             self.certs["key"], "--upstream-port", str(self.upstream_port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
        )  # fmt: skip
        log.close()
        line = self.proc.stdout.readline().decode().split()
        if len(line) != 2 or line[0] != "READY":
            raise SystemExit(f"error: the TLS proxy did not start; see {self.log_path}")
        self.port = int(line[1])
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    @property
    def endpoint(self):
        return f"https://localhost:{self.port}"


async def _pump(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        try:
            writer.close()
        except (ConnectionError, ssl.SSLError, RuntimeError):
            pass


async def _serve(args):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)

    async def handle(client_reader, client_writer):
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", args.upstream_port)
        except OSError:
            client_writer.close()
            return
        for writer in (client_writer, upstream_writer):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(_pump(client_reader, upstream_writer), _pump(upstream_reader, client_writer))

    # `localhost` is what the functions connect to: listen on every loopback
    # address it resolves to, so no client waits for a refused first try.
    addresses = sorted({info[4][0] for info in socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM)})
    first = await asyncio.start_server(handle, addresses[0], 0, ssl=context)
    port = first.sockets[0].getsockname()[1]
    servers = [first] + [await asyncio.start_server(handle, a, port, ssl=context) for a in addresses[1:]]
    print(f"READY {port}", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--upstream-port", type=int, required=True)
    args = parser.parse_args()
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

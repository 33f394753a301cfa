"""A proxy in front of DynamoDB Local, in a process of its own (asyncio), so
that it never competes with the emulator for the GIL. Two jobs, either or
both:

- HTTPS, so that the functions pay for TLS as they do on AWS: a throwaway
  certificate authority made at run time with the `openssl` command, a
  server certificate for `localhost`, and TLS terminated here;
- a store with a stated latency: every HTTP request is held for a fixed
  delay before it goes upstream, as if DynamoDB answered from the same
  region rather than from loopback, and (`--record`) the `X-Amzn-Trace-Id`
  each request carried is written down, one line per request.

Hand-written because no proxy on the registries this project uses adds a
per-request delay (the kernel here has no `netem`, and toxiproxy has no
server build we can install) and records a header, in about seventy lines.

As a module: `make_certificates()` and `Proxy`. As a script: the proxy.
"""

import argparse
import asyncio
import contextlib
import glob
import os
import pathlib
import shlex
import shutil
import socket
import ssl
import subprocess
import sys

from emulator import parse_head, stop

SYSTEM_BUNDLE_CANDIDATES = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
]
SYSTEM_CERT_DIR_CANDIDATES = ["/etc/ssl/certs", "/etc/pki/tls/certs"]
CERT_FILES = {"ca": "ca.pem", "bundle": "bundle.pem", "certdir": "certdir", "cert": "server.pem", "key": "server.key"}
SERVER_EXTENSIONS = """basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1
"""


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
    folder = pathlib.Path(workdir)
    (folder / "certdir").mkdir(parents=True, exist_ok=True)
    (folder / "server.ext").write_text(SERVER_EXTENSIONS)
    for command in (
        "req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2"
        " -subj '/CN=plant-store bench CA (throwaway)'"
        " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign",
        "req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost",
        "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext",
    ):
        openssl = ["openssl", *shlex.split(command)]
        subprocess.run(openssl, cwd=folder, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    system_bundle = next((p for p in SYSTEM_BUNDLE_CANDIDATES if os.path.isfile(p)), None)
    system_pem = pathlib.Path(system_bundle).read_text() if system_bundle else ""
    (folder / "bundle.pem").write_text(system_pem.rstrip("\n") + "\n" + (folder / "ca.pem").read_text())
    system_dir = next((d for d in SYSTEM_CERT_DIR_CANDIDATES if os.path.isdir(d)), None)
    for file in glob.glob(os.path.join(system_dir, "*")) if system_dir else []:
        os.symlink(os.path.realpath(file), folder / "certdir" / os.path.basename(file))
    shutil.copy(folder / "ca.pem", folder / "certdir" / "plant-store-bench-ca.pem")
    return {name: str(folder / file) for name, file in CERT_FILES.items()}


class Proxy:
    """Runs this file as a script on a free port; stopped on exit. With
    `certs`, it speaks HTTPS; with `delay_ms`, it holds every request that
    long; with `record` (a file path), it writes each request's trace header."""

    def __init__(self, upstream_port, log_path, certs=None, delay_ms=0.0, record=None):
        self.certs, self.record = certs, record
        args = ["--upstream-port", str(upstream_port), "--delay-ms", str(delay_ms)]
        args += ["--cert", certs["cert"], "--key", certs["key"]] if certs else []
        args += ["--record", record] if record else []
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        line = self.proc.stdout.readline().decode().split()
        if len(line) != 2 or line[0] != "READY":
            raise SystemExit(f"error: the proxy did not start; see {log_path}")
        self.port = int(line[1])
        self.endpoint = f"{'https' if certs else 'http'}://localhost:{self.port}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        stop(self.proc)

    def recorded_trace_ids(self):
        """The `X-Amzn-Trace-Id` of every request so far ('' where none)."""
        with open(self.record) as f:
            return [line.rstrip("\n") for line in f]


def _close(writer):
    with contextlib.suppress(ConnectionError, ssl.SSLError, RuntimeError):
        writer.close()


async def _pump(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        _close(writer)


async def _requests(reader, writer, delay_s, record):
    """Client to upstream, one HTTP/1.1 request at a time (the SDKs do not
    pipeline): each is read whole, its trace header recorded, held for
    `delay_s`, then forwarded."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            _, fields = parse_head(head[:-4])
            if "transfer-encoding" in fields:
                raise ValueError("a request body without Content-Length: not supported")
            body = await reader.readexactly(int(fields.get("content-length", 0)))
            if record:
                record.write(fields.get("x-amzn-trace-id", "") + "\n")
                record.flush()
            if delay_s:
                await asyncio.sleep(delay_s)
            writer.write(head + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
        pass
    finally:
        _close(writer)


async def _serve(args, record):
    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
    plain = not args.delay_ms and not record

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
        upstream = (
            _pump(client_reader, upstream_writer)
            if plain
            else _requests(client_reader, upstream_writer, args.delay_ms / 1000, record)
        )
        await asyncio.gather(upstream, _pump(upstream_reader, client_writer))

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
    parser.add_argument("--cert", help="serve HTTPS with this certificate")
    parser.add_argument("--key")
    parser.add_argument("--upstream-port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="hold every request this long")
    parser.add_argument("--record", help="append each request's X-Amzn-Trace-Id to this file")
    args = parser.parse_args()
    try:
        with open(args.record, "a") if args.record else contextlib.nullcontext() as record:
            asyncio.run(_serve(args, record))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

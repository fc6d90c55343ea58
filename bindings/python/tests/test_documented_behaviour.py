"""What the documentation (README.md, the book's Python page) says the library does, checked against it where earlier text was wrong: TLS
connections to PostgreSQL work (the handshake, certificate checks); the change log is each
agent's own, not the store's; expire_agents' default batch is the command's; and the text no
longer says otherwise."""

from __future__ import annotations

import inspect
import re
import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Callable, Iterator, List, Tuple

import pytest

import backends
from agent_state import Agent, AuthError, InvalidArgumentError, UnavailableError, expire_agents
from agent_state.store import DEFAULT_EXPIRE_LIMIT

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
# The book's Getting started page for Python, where the package's reference part lives.
PAGE = HERE.parents[2] / "docs" / "src" / "getting-started" / "python.md"
CLI_ARGS = HERE.parents[2] / "crates" / "agent-state-cli" / "src" / "args.rs"


# -- TLS ---------------------------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture
def certificates(tmp_path: Path) -> Path:
    """A CA, and a server certificate for 127.0.0.1 it signed (the openssl command makes them)."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make certificates with")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test CA", cwd=tmp_path)
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=tmp_path)
    (tmp_path / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=tmp_path,
    )
    return tmp_path


@pytest.fixture
def tls_server(certificates: Path) -> Iterator[Tuple[int, List[bytes]]]:
    """A PostgreSQL server as far as TLS goes: it answers an SSLRequest with "S", completes the
    TLS handshake with the certificate for 127.0.0.1, reads the client's startup message
    through the encrypted connection into the list it yields with its port, and hangs up."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates / "server.pem", certificates / "server.key")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(60)
    received: List[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(60)
                if conn.recv(8)[4:] != b"\x04\xd2\x16\x2f":  # not an SSLRequest
                    continue
                conn.sendall(b"S")
                try:
                    with context.wrap_socket(conn, server_side=True) as secured:
                        received.append(secured.recv(4096))
                except (ssl.SSLError, OSError):
                    pass  # the client refused the handshake

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], received
    stop.set()
    listener.close()
    thread.join(timeout=60)


def test_postgresql_connections_use_tls(tls_server: Tuple[int, List[bytes]], certificates: Path) -> None:
    port, received = tls_server
    uri = f"postgresql://app@127.0.0.1:{port}/app?sslmode=verify-full&sslrootcert={certificates / 'ca.pem'}"
    # The fake server hangs up after the startup message: the open fails, having spoken TLS.
    with pytest.raises(UnavailableError):
        Agent(uri, agent_id="bot", server_timeout_ms=5000)
    assert len(received) == 1 and b"user\x00app\x00" in received[0], received
    # A server certificate no trusted CA signed is refused, as an authentication failure.
    untrusted = f"postgresql://app@127.0.0.1:{port}/app?sslmode=verify-full&sslrootcert={certificates / 'server.pem'}"
    with pytest.raises(AuthError, match="not signed by a CA this client trusts"):
        Agent(untrusted, agent_id="bot", server_timeout_ms=5000)
    assert len(received) == 1


# -- the change log is the agent's -------------------------------------------------------------


@pytest.mark.any_backend
def test_the_change_log_is_each_agents_own(open_agent: Callable[..., Agent], db_path: Path) -> None:
    # Unique ids: on PostgreSQL the agents live on a server other runs share.
    one_id, two_id = backends.new_agent_id() + "-one", backends.new_agent_id() + "-two"
    one = open_agent(db_path, agent_id=one_id, change_log={"keep_last": 10})
    one.set_state({"n": 1})
    two = open_agent(db_path, agent_id=two_id)
    two.set_state({"n": 2})
    assert [c.version for c in one.changes_since(0)] == [1]
    with pytest.raises(InvalidArgumentError, match="change log (of this agent )?is off"):
        two.changes_since(0)
    # Another handle on agent "one" logs with the setting recorded for it.
    again = open_agent(db_path, agent_id=one_id)
    again.set_state({"n": 3})
    assert [c.version for c in one.changes_since(0)] == [1, 2]


# -- the expiry batch ------------------------------------------------------------------------


def test_the_default_expiry_batch_is_the_commands() -> None:
    assert inspect.signature(expire_agents).parameters["limit"].default == DEFAULT_EXPIRE_LIMIT
    if not CLI_ARGS.is_file():
        pytest.skip(f"no {CLI_ARGS}: not a checkout of the repository")
    batch = re.search(r"default_value_t = (\d+),[^\]]*\]\s*batch: u64", CLI_ARGS.read_text("utf-8"))
    assert batch, f"no --batch default in {CLI_ARGS}"
    assert int(batch.group(1)) == DEFAULT_EXPIRE_LIMIT


# -- the text ----------------------------------------------------------------------------------


def test_the_readme_and_docstrings_no_longer_say_otherwise() -> None:
    import agent_state

    texts = {README.name: README.read_text("utf-8"), PAGE.name: PAGE.read_text("utf-8")}
    for path in Path(agent_state.__file__).resolve().parent.glob("*.py"):
        texts[path.name] = path.read_text("utf-8")
    for name, text in texts.items():
        flat = " ".join(text.split())
        assert "no TLS in this build" not in flat, name
        assert "store's change log" not in flat, name
        assert "every agent on the file" not in flat, name
    readme = " ".join(texts[PAGE.name].split())
    assert f"`expire_agents(path, idle_for, *, limit={DEFAULT_EXPIRE_LIMIT}," in readme
    assert f"The default `limit`, {DEFAULT_EXPIRE_LIMIT:,}," in readme

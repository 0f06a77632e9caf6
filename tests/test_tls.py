"""TLS on node links and client connections, with certificates made by trustme."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trustme

from feds import client
from feds.codec import encode_frame
from feds.driver import Driver
from feds.runtime import NodeRuntime
from feds.tls import TlsSettings, client_context
from feds.topology import load, loads
from feds.values import record
from tests.net_helpers import packets_to_the_end


@pytest.fixture
def certs(tmp_path: Path) -> tuple[trustme.CA, Path]:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    for name in ("root", "leaf", "app"):
        cert = ca.issue_cert("127.0.0.1", "localhost")
        cert.private_key_pem.write_to_path(str(tmp_path / f"{name}.key"))
        cert.cert_chain_pems[0].write_to_path(str(tmp_path / f"{name}.pem"))
        for pem in cert.cert_chain_pems[1:]:
            pem.write_to_path(str(tmp_path / f"{name}.pem"), append=True)
    return ca, tmp_path


def settings(where: Path, mutual: bool) -> TlsSettings:
    return TlsSettings(
        str(where / "ca.pem"), str(where / "{name}.pem"), str(where / "{name}.key"), mutual
    )


async def tls_node(nursery: trio.Nursery, name: str, tls: TlsSettings) -> tuple[NodeRuntime, int]:
    driver = Driver()
    nursery.start_soon(driver.run)
    runtime = NodeRuntime(driver.scheduler, name, "copy-up", tls=tls)
    return runtime, await nursery.start(runtime.serve, "127.0.0.1", 0)


@pytest.mark.parametrize("mutual", [False, True])
async def test_nodes_and_clients_speak_tls(
    nursery: trio.Nursery, certs: tuple[trustme.CA, Path], mutual: bool
) -> None:
    _, where = certs
    tls = settings(where, mutual)
    root, port = await tls_node(nursery, "root", tls)
    leaf, leaf_port = await tls_node(nursery, "leaf", tls)
    nursery.start_soon(leaf.uplink_tcp, "127.0.0.1", port)
    with trio.fail_after(10):
        while leaf.node.parent_service is None:
            await trio.sleep(0.01)
    app = client_context(
        str(where / "ca.pem"),
        *((str(where / "app.pem"), str(where / "app.key")) if mutual else ()),
    )
    async with client.connect(f"127.0.0.1:{leaf_port}", tls=app) as ds:
        ds.assert_(record("secret", 1))
        await ds.sync()
    async with client.connect(f"127.0.0.1:{port}", tls=app) as ds:
        assert await ds.query("<secret $x>") == []  # retracted when the first client left
    assert root.node.neighbours


async def test_a_plaintext_client_and_an_untrusted_node_are_refused(
    nursery: trio.Nursery, certs: tuple[trustme.CA, Path]
) -> None:
    _, where = certs
    _, port = await tls_node(nursery, "root", settings(where, mutual=True))
    with pytest.raises(client.FedsError):
        async with client.connect(f"127.0.0.1:{port}", timeout=5) as ds:
            await ds.sync()
    no_cert = client_context(str(where / "ca.pem"))
    with pytest.raises(client.FedsError):  # mutual TLS: a client without a certificate
        async with client.connect(f"127.0.0.1:{port}", tls=no_cert, timeout=5) as ds:
            await ds.sync()
    other_ca = trustme.CA()
    other_ca.cert_pem.write_to_path(str(where / "other.pem"))
    with pytest.raises(client.FedsError, match=r"TLS handshake .* failed"):
        async with client.connect(
            f"127.0.0.1:{port}", tls=client_context(str(where / "other.pem")), timeout=5
        ):
            pass


async def test_a_tls_connection_cut_with_bytes_unread_still_hears_why(
    nursery: trio.Nursery, certs: tuple[trustme.CA, Path]
) -> None:
    """As over plain TCP (tests/test_transport.py): the node's close of a TLS connection whose
    far side sent more than the node read resets nothing, so the error packet arrives."""
    _, where = certs
    _, port = await tls_node(nursery, "root", settings(where, mutual=False))
    tcp = await trio.open_tcp_stream("127.0.0.1", port)
    tls = trio.SSLStream(
        tcp,
        client_context(str(where / "ca.pem")),
        server_hostname="127.0.0.1",
        https_compatible=True,  # the node ends the stream under TLS: EOF, no close_notify
    )
    await tls.send_all(encode_frame(record("nonsense")) + encode_frame(b"x" * 100) * 2000)
    await trio.sleep(0.5)  # time for the node to refuse the packet and close, or to reset
    packets = await packets_to_the_end(tls)  # a reset raises here
    await trio.aclose_forcefully(tls)
    assert packets[-1] == record("error", "packet before hello: nonsense", None)


def test_the_tls_table_of_a_topology(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        '[tls]\nca = "ca.pem"\ncert = "{name}.pem"\nkey = "{name}.key"\nmutual = true\n'
        "[nodes.r]\nport = 7400\n"
    )
    t = load(path)
    assert t.tls == TlsSettings(
        str(tmp_path / "ca.pem"), str(tmp_path / "{name}.pem"), str(tmp_path / "{name}.key"), True
    )
    assert t.tls.for_node("r") == (str(tmp_path / "r.pem"), str(tmp_path / "r.key"))
    with pytest.raises(ValueError, match=r"\[tls\] needs key"):
        loads('[tls]\nca = "a"\ncert = "b"\n[nodes.r]\nport = 7400\n')

"""`feds spaces serve` for real: a server subprocess used over TCP through both gate modes."""

from __future__ import annotations

import signal
import subprocess

import pytest
import trio

from feds.spaces import ANY, Formal, Long, RemoteSpace, SpaceError
from tests.test_cli import FEDS, feds, wait_for_line


async def test_serve_runs_a_repository_behind_two_gates() -> None:
    proc = subprocess.Popen(
        [*FEDS, "spaces", "serve", "tcp://127.0.0.1:0/?keep", "tcp://127.0.0.1:0/?CONN",
         "--space", "seq=sequential", "--space", "jobs=queue"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        keep = wait_for_line(proc, "?keep spaces seq(sequential) jobs(queue)").split()[1]
        conn = wait_for_line(proc, "?conn spaces").split()[1]
        with trio.fail_after(20):
            async with (
                RemoteSpace(keep.replace("/?", "/jobs?")) as jobs_keep,
                RemoteSpace(conn.replace("/?", "/jobs?")) as jobs_conn,
            ):
                got = []

                async def worker():
                    got.append(await jobs_conn.get("job", Formal(Long)))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(worker)
                    await jobs_keep.put("other", 1)
                    await jobs_keep.getp("other", ANY)
                    await jobs_keep.put("job", Long(2**40))
                assert got == [("job", Long(2**40))]
                assert await jobs_keep.queryAll(ANY, ANY) == []
            with pytest.raises(SpaceError, match="nosuch"):
                async with RemoteSpace(keep.replace("/?", "/nosuch?")) as nosuch:
                    await nosuch.queryp(ANY)
        # the client commands, against the same server
        seq = keep.replace("/?", "/seq?")
        assert feds("spaces", "put", seq, "job", "7L", "'c'", "2.5f", "true").returncode == 0
        found = feds("spaces", "queryp", seq, '"job"', "?long", "?char", "?float", "?any")
        assert (found.returncode, found.stdout) == (0, "\"job\" 7L 'c' 2.5f true\n")
        assert feds(
            "spaces", "getall", conn.replace("/?", "/seq?"), "?string", *["?any"] * 4
        ).stdout
        assert feds("spaces", "getp", seq, "job", "?any").returncode == 1
        waited = feds("spaces", "get", seq, "never", "--timeout", "0.2")
        assert waited.returncode == 1 and "within 0.2 s" in waited.stderr
    finally:
        proc.send_signal(signal.SIGINT)
    assert proc.wait(10) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tcp://127.0.0.1:0/?keep"], "at least one --space"),
        (["tcp://127.0.0.1:0/?keep", "--space", "a=heap"], "unknown kind 'heap'"),
        (["tcp://127.0.0.1:0/?keep", "--space", "a"], "NAME=KIND"),
        (["tcp://127.0.0.1:0/?pull", "--space", "a=queue"], "PULL is not supported"),
        (["tcp://127.0.0.1:0/a?keep", "--space", "a=queue"], "names no space"),
    ],
)
def test_serve_refuses_bad_arguments_with_exit_code_2(args, message) -> None:
    result = feds("spaces", "serve", *args)
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["put", "tcp://127.0.0.1:1/seq?push", "1"], "PUSH is not supported"),
        (["queryp", "tcp://127.0.0.1:1/seq", "?nope"], "unknown type URI"),
        (["put", "tcp://127.0.0.1:1/", "1"], "names its space"),
    ],
)
def test_client_commands_refuse_bad_arguments_with_exit_code_2(args, message) -> None:
    result = feds("spaces", *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_help_explains_the_gate_uri() -> None:
    result = feds("spaces", "serve", "--help")
    assert result.returncode == 0
    assert "tcp://HOST[:PORT]/?keep" in result.stdout

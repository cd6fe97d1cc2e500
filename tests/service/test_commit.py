"""Group commit: concurrent submissions share one log transaction, a lone one never
waits for company, and a failed transaction fails every answer that waited for it."""

from __future__ import annotations

import asyncio
import time

import pytest

from hybridroute.exceptions import RequestIdConflictError
from hybridroute.service._commit import GroupCommitter, LogUnavailable

pytestmark = pytest.mark.service


class D:
    """A decision as the committer sees it: its router and version (the key's prefix)."""

    router = "r"
    router_version = "1"

    def __init__(self, text: str = "t") -> None:
        self.text = text


class FakeLog:
    """``log_groups`` as the logs do it: a group with a request id already written with
    another text is refused whole (a RequestIdConflictError in its place)."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list] = []
        self.fail = fail
        self.stored: dict[str, str] = {}

    def log_groups(self, groups):
        entries = [e for g in groups for e in g]
        self.calls.append(entries)
        if self.fail:
            raise OSError("could not write postgresql://u:hunter2@db/log: disk full")
        keys = [e[1] for e in entries if e[1] is not None]
        assert len(keys) == len(set(keys)), "a request id in two groups of one write"
        out = []
        for g in groups:
            bad = [i for i, (d, rid, _) in enumerate(g) if self.stored.get(rid, d.text) != d.text]
            if bad:
                out.append(RequestIdConflictError("conflict", positions=tuple(bad)))
                continue
            for d, rid, _ in g:
                if rid is not None:
                    self.stored.setdefault(rid, d.text)
            out.append([("logged", e[1]) for e in g])
        return out


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


@pytest.mark.parametrize("n", [2, 5])
def test_concurrent_submissions_share_one_commit(n):
    log = FakeLog()

    async def main():
        c = GroupCommitter(log, window_s=0.0)
        out = await asyncio.gather(*(c.submit([(D(), f"r{i}", "live")]) for i in range(n)))
        await c.aclose()
        return out

    out = run(main())
    assert out == [[("logged", f"r{i}")] for i in range(n)]
    assert [len(call) for call in log.calls] == [n]


def test_a_lone_request_does_not_wait_for_the_window():
    log = FakeLog()

    async def main():
        c = GroupCommitter(log, window_s=0.5)
        start = time.perf_counter()
        for i in range(3):
            await c.submit([(D(), f"r{i}", "live")])
        took = time.perf_counter() - start
        await c.aclose()
        return took

    assert run(main()) < 0.4
    assert [len(call) for call in log.calls] == [1, 1, 1]


def test_a_failed_commit_fails_its_group(caplog):
    log = FakeLog(fail=True)

    async def main():
        c = GroupCommitter(log, window_s=0.0)
        results = await asyncio.gather(
            *(c.submit([(D(), f"r{i}", "live")]) for i in range(3)), return_exceptions=True
        )
        await c.aclose()
        return results

    results = run(main())
    assert all(isinstance(r, LogUnavailable) for r in results)
    assert "hunter2" not in caplog.text


def test_a_closed_committer_refuses():
    async def main():
        c = GroupCommitter(FakeLog(), window_s=0.0)
        await c.aclose()
        with pytest.raises(LogUnavailable, match="shutting down"):
            await c.submit([(D(), "r", "live")])

    run(main())


def test_one_request_id_never_in_two_requests_of_one_transaction():
    """Two requests with one id wait for each other, in arrival order, so the later one is
    compared with what the earlier one wrote; others share the transaction."""
    log = FakeLog()

    async def main():
        c = GroupCommitter(log, window_s=0.0)
        out = await asyncio.gather(
            c.submit([(D("a"), "k", "live")]),
            c.submit([(D("b"), "k", "live"), (D(), "j", "live")]),
            c.submit([(D(), "j", "live")]),  # shares j with the waiting one: waits too
            c.submit([(D(), "x", "live")]),
            c.submit([(D("a"), "k", "live")]),
            return_exceptions=True,
        )
        await c.aclose()
        return out

    out = run(main())
    assert out[0] == [("logged", "k")] and out[3] == [("logged", "x")]
    assert isinstance(out[1], RequestIdConflictError) and out[1].positions == (0,)
    assert out[2] == [("logged", "j")]  # j was never written by the refused request
    assert out[4] == [("logged", "k")]  # the same request as the first: answered
    calls = [sorted(e[1] for e in call) for call in log.calls]
    assert calls == [["k", "x"], ["j", "k"], ["j", "k"]]


def test_entries_that_stand_alone_are_refused_alone():
    log = FakeLog()

    async def main():
        c = GroupCommitter(log, window_s=0.0)
        await c.submit([(D("a"), "k", "shadow")])
        out = await c.submit(
            [(D("b"), "k", "shadow"), (D(), "m", "shadow"), (D(), None, "shadow")],
            atomic=False,
        )
        with pytest.raises(RequestIdConflictError):
            await c.submit([(D("b"), "k", "live"), (D(), "n", "live")])
        await c.aclose()
        return out

    assert run(main()) == [None, ("logged", "m"), ("logged", None)]
    assert "n" not in log.stored

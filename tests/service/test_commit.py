"""Group commit: concurrent submissions share one log transaction, a lone one never
waits for company, and a failed transaction fails every answer that waited for it."""

from __future__ import annotations

import asyncio
import time

import pytest

from hybridroute.service._commit import GroupCommitter, LogUnavailable

pytestmark = pytest.mark.service


class FakeLog:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list] = []
        self.fail = fail

    def log_many(self, entries):
        self.calls.append(list(entries))
        if self.fail:
            raise OSError("could not write postgresql://u:hunter2@db/log: disk full")
        return [("logged", e[1]) for e in entries]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


@pytest.mark.parametrize("n", [2, 5])
def test_concurrent_submissions_share_one_commit(n):
    log = FakeLog()

    async def main():
        c = GroupCommitter(log, window_s=0.0)
        out = await asyncio.gather(*(c.submit([(None, f"r{i}", "live")]) for i in range(n)))
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
            await c.submit([(None, f"r{i}", "live")])
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
            *(c.submit([(None, f"r{i}", "live")]) for i in range(3)), return_exceptions=True
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
            await c.submit([(None, "r", "live")])

    run(main())

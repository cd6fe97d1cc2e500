"""litellm kept quiet without changing the host for good (issue 16): the seam used to set
``litellm.suppress_debug_info = True`` and add a warning filter when it was imported,
for the life of the process. Now the flag is set only while a seam call runs
(reference-counted), and no filter outlives a synchronous warm-up."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import warnings

import litellm
import pytest

from hybridroute.classifiers.llm._quiet import (
    READONLY_WARNING,
    quiet_litellm,
    readonly_warnings_ignored,
)

# --------------------------------------------------------------------------- in a fresh process

HOST = r"""
import json, sys, warnings
import litellm
from typing_extensions import ReadOnly, TypedDict
import pydantic

host_flag = litellm.suppress_debug_info
from hybridroute.classifiers import LLMClassifier, RetrySettings  # numpy adds its filters
before_import = list(warnings.filters)
import hybridroute.classifiers.llm._seam
after_import = list(warnings.filters)

from hybridroute.testing import StandInLLM

during = []

def policy(text, labels):
    during.append(litellm.suppress_debug_info)  # read while the client awaits the answer
    return labels[0]

out = {"host_flag": host_flag, "import_kept_filters": before_import == after_import}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    start = list(warnings.filters)
    with StandInLLM(policy, labels=["a", "b"], faults={"server_error": 0.3}) as server:
        for model in ("openai/x", "hosted_vllm/x"):
            clf = LLMClassifier(
                model, api_base=server.api_base,
                retry=RetrySettings(timeout=5, backoff_initial=0.001, backoff_max=0.002),
            ).fit(["x", "y"], ["a", "b"])
            out[model] = [item.label for item in clf.classify(["one", "two", "three"]).items]
    out["call_kept_filters"] = list(warnings.filters) == start
    out["flag_after"] = litellm.suppress_debug_info
    out["flag_during"] = sorted(set(during))
    out["readonly_warnings"] = [str(w.message)[:80] for w in caught if "ReadOnly" in str(w.message)]

    class Mine(TypedDict):  # the host's own ReadOnly TypedDict still warns as it should
        name: ReadOnly[str]

    pydantic.TypeAdapter(Mine)
    out["host_warning_shown"] = any("'Mine'" in str(w.message) for w in caught)
print(json.dumps(out))
"""


@pytest.mark.parametrize("host_flag", [False, True])
def test_an_llm_call_leaves_the_hosts_flag_and_filters_as_they_were(host_flag):
    code = f"import hybridroute, litellm\nlitellm.suppress_debug_info = {host_flag}\n" + HOST
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["openai/x"] == ["a"] * 3 and out["hosted_vllm/x"] == ["a"] * 3
    assert out["host_flag"] is host_flag and out["flag_after"] is host_flag
    assert out["flag_during"] == [True]  # no banner while the seam's requests run
    assert out["import_kept_filters"] and out["call_kept_filters"]
    assert out["readonly_warnings"] == []  # litellm's own types were built quietly
    assert out["host_warning_shown"]  # ... and nothing hides the host's own warnings
    assert "Give Feedback" not in done.stdout  # the injected 500s printed no banner


# --------------------------------------------------------------------------- the flag


@pytest.fixture
def host_flag(request):
    saved = litellm.suppress_debug_info
    litellm.suppress_debug_info = request.param
    yield request.param
    litellm.suppress_debug_info = saved


@pytest.mark.parametrize("host_flag", [False, True], indirect=True)
def test_overlapping_blocks_restore_the_hosts_value_when_the_last_ends(host_flag):
    first, second = quiet_litellm(), quiet_litellm()
    first.__enter__()
    second.__enter__()
    assert litellm.suppress_debug_info is True
    first.__exit__(None, None, None)  # ends before the other: the flag stays on
    assert litellm.suppress_debug_info is True
    second.__exit__(None, None, None)
    assert litellm.suppress_debug_info is host_flag


@pytest.mark.parametrize("host_flag", [False, True], indirect=True)
def test_an_error_inside_still_restores(host_flag):
    with pytest.raises(RuntimeError, match="boom"), quiet_litellm():
        raise RuntimeError("boom")
    assert litellm.suppress_debug_info is host_flag


@pytest.mark.parametrize("host_flag", [False], indirect=True)
def test_a_value_the_host_sets_meanwhile_is_kept(host_flag):
    with quiet_litellm():
        litellm.suppress_debug_info = False  # the host's own choice, mid-call
    assert litellm.suppress_debug_info is False


@pytest.mark.parametrize("host_flag", [False, True], indirect=True)
@pytest.mark.parametrize("n_tasks", [2, 25])
def test_tasks_across_awaits(host_flag, n_tasks):
    seen: list[bool] = []

    async def call(i: int) -> None:
        with quiet_litellm():
            for _ in range(3):
                await asyncio.sleep(0.001 * (i % 4))
                seen.append(litellm.suppress_debug_info)

    async def main() -> None:
        await asyncio.gather(*(call(i) for i in range(n_tasks)))

    asyncio.run(main())
    assert seen and all(seen)
    assert litellm.suppress_debug_info is host_flag


@pytest.mark.parametrize("host_flag", [False, True], indirect=True)
@pytest.mark.parametrize("n_threads", [2, 8])
def test_threads(host_flag, n_threads):
    barrier = threading.Barrier(n_threads)
    seen: list[bool] = []

    def work() -> None:
        for _ in range(200):
            with quiet_litellm():
                seen.append(litellm.suppress_debug_info)
        barrier.wait(timeout=10)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not any(t.is_alive() for t in threads)
    assert len(seen) == 200 * n_threads and all(seen)
    assert litellm.suppress_debug_info is host_flag


# --------------------------------------------------------------------------- the warning


@pytest.mark.parametrize(
    "message",
    [
        "Item 'index' on TypedDict class 'ChatCompletionThinkingBlock' is using the "
        "`ReadOnly` qualifier. Pydantic will not protect items from any mutation",
        "Items 'device_code', 'user_code' on TypedDict class '_DeviceCode' are using the "
        "`ReadOnly` qualifier. Pydantic will not protect items from any mutation",
    ],
)
def test_the_warm_up_ignores_only_pydantics_readonly_message_and_only_inside(message):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = list(warnings.filters)
        with readonly_warnings_ignored():
            warnings.warn(message, UserWarning, stacklevel=1)
            warnings.warn("another UserWarning", UserWarning, stacklevel=1)
            warnings.warn(message, DeprecationWarning, stacklevel=1)
        assert list(warnings.filters) == start
        warnings.warn(message, UserWarning, stacklevel=1)
    shown = [(type(w.message), str(w.message)) for w in caught]
    assert shown == [
        (UserWarning, "another UserWarning"),
        (DeprecationWarning, message),
        (UserWarning, message),  # outside the block: the host's filters decide
    ]
    assert READONLY_WARNING.startswith("Items?")

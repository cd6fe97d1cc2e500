"""One retry-settings value: the LLM seam's (``hybridroute.classifiers.RetrySettings``) and
the HTTP client's (``hybridroute.client.RetrySettings``, the same value with the client's
defaults and older names) are one type, and the client waits exactly as it did."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybridroute import classifiers, client
from hybridroute._retry_settings import RetrySettings


def test_both_import_paths_give_the_one_value():
    assert classifiers.RetrySettings is RetrySettings
    assert issubclass(client.RetrySettings, RetrySettings)
    assert isinstance(client.RetrySettings(), classifiers.RetrySettings)
    assert {f.name for f in dataclasses.fields(client.RetrySettings)} == {
        f.name for f in dataclasses.fields(RetrySettings)
    }


def test_the_client_keeps_its_defaults_and_names():
    s = client.RetrySettings()
    assert (s.retries, s.backoff_s, s.max_backoff_s, s.jitter) == (2, 0.05, 1.0, 0.0)
    assert (s.max_transport_retries, s.backoff_initial, s.backoff_max) == (2, 0.05, 1.0)
    old = client.RetrySettings(retries=4, backoff_s=0.2, max_backoff_s=3.0)
    new = client.RetrySettings(max_transport_retries=4, backoff_initial=0.2, backoff_max=3.0)
    assert old == new
    assert dataclasses.replace(old, jitter=0.1).retries == 4
    assert client.RetrySettings.from_dict(old.to_dict()) == old


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"retries": 1, "max_transport_retries": 1}, TypeError, "retries or max_transport"),
        ({"backoff_s": 1, "backoff_initial": 1}, TypeError, "backoff_s or backoff_initial"),
        ({"max_transport_retries": 11}, ValueError, "between 0 and 10"),
        ({"retries": 2.0}, TypeError, "must be an integer"),
        ({"jitter": 2.0}, ValueError, r"jitter must be in \[0, 1\]"),
        ({"max_backoff_s": -1}, ValueError, "backoff_max must be finite and >= 0"),
        ({"retry": 1}, TypeError, "unexpected keyword"),
    ],
)
def test_the_client_settings_are_checked_once(kwargs, error, match):
    with pytest.raises(error, match=match):
        client.RetrySettings(**kwargs)


def _old_wait(retry, backoff_s, max_backoff_s, retry_after):
    """The client's wait before it shared the settings value (its former ``delay``)."""
    wait = backoff_s * 2.0 ** (retry - 1)
    if retry_after is not None:
        try:
            asked = float(retry_after)
        except ValueError:
            asked = 0.0
        if math.isfinite(asked) and asked > wait:
            wait = asked
    return min(wait, max_backoff_s)


@given(
    retry=st.integers(1, 10),
    backoff=st.floats(0, 5),
    cap=st.floats(0, 30),
    retry_after=st.one_of(
        st.none(),
        st.floats(allow_nan=True, allow_infinity=True).map(str),
        st.sampled_from(["soon", "Wed, 21 Oct 2015 07:28:00 GMT", "", "-3", "1e999"]),
    ),
)
def test_the_client_waits_as_it_did(retry, backoff, cap, retry_after):
    s = client.RetrySettings(retries=10, backoff_s=backoff, max_backoff_s=cap)
    assert s.wait(retry, retry_after) == pytest.approx(
        _old_wait(retry, backoff, cap, retry_after), rel=1e-12, abs=1e-12
    )


def test_the_seams_value_drives_the_client_and_the_clients_the_seam():
    llm_settings = classifiers.RetrySettings(max_transport_retries=5, backoff_initial=0.01)
    with client.RouterClient("http://127.0.0.1:9", retries=llm_settings) as c:
        assert c.retry.retries == 5 and c.retry.backoff_s == 0.01
        assert isinstance(c.retry, client.RetrySettings)
    clf = classifiers.LLMClassifier("m", retry=client.RetrySettings(retries=1))
    clf.fit(["x", "y"], ["a", "b"])  # checks its settings; asks nothing
    assert clf.retry is not None and clf.retry.max_requests == 1 + 1 + 1

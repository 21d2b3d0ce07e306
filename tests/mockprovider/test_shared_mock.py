"""One mock for every pytest-xdist worker (`--mock-llm-url`): the fixture gives each test its own
id, so tests running at once in different processes see only their own journal and meet only
their own faults."""

from __future__ import annotations

import pytest

from mockprovider.server import serve_in_thread

SUITE = """
import httpx
import pytest

BODY = {"contents": [{"role": "user", "parts": [{"text": "the same request in every test"}]}]}


@pytest.mark.parametrize("k", range(6))
def test_each_test_meets_its_own_fault_and_sees_its_own_journal(mock_llm_shared, k):
    assert mock_llm_shared.test_id.startswith(("gw0-", "gw1-"))
    url = f"{mock_llm_shared.root_url}/v1beta/models/plan+fault=429x1:generateContent"
    statuses = [httpx.post(url, json=BODY).status_code for _ in range(2)]  # a retry: the same request
    assert statuses == [429, 200]
    mine = mock_llm_shared.journal
    assert len(mine) == 2 and {e.test_id for e in mine} == {mock_llm_shared.test_id}
    assert len(mock_llm_shared.requests(path="/v1/models/plan+fault=429x1:generateContent")) == 2
    mock_llm_shared.clear()
    assert mock_llm_shared.journal == []


@pytest.mark.mock_llm(scenarios=["weather.json"])
def test_a_shared_mock_in_another_process_says_it_serves_what_it_was_started_with(mock_llm_shared):
    pass
"""


@pytest.mark.slow
def test_workers_sharing_one_mock_keep_their_journals_and_faults_apart(pytester: pytest.Pytester):
    (pytester.path / "test_shared.py").write_text(SUITE)
    with serve_in_thread(journal=1000) as url:
        done = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-n", "2",
                                             f"--mock-llm-url={url}")
    done.assert_outcomes(passed=6, errors=1)
    assert "serves the scenario files it was started with" in done.stdout.str()


def test_a_shared_mock_without_a_journal_fails_the_set_up_saying_how_to_start_it(pytester: pytest.Pytester):
    (pytester.path / "test_shared.py").write_text("def test_it(mock_llm_shared):\n    pass\n")
    with serve_in_thread() as url:
        done = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", f"--mock-llm-url={url}")
    done.assert_outcomes(errors=1)
    assert "keeps no journal: start it with --journal N" in done.stdout.str()

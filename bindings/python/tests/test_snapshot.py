"""An agent's snapshot (``_snapshot``, ``_predict``): what a state call returns from it is what
decoding the library's text returns, type for type, member order and exact numbers included;
every dict and list it returns is new; and it is used (the prediction of a plain patch, the
copy of an unchanged state), not only correct.

The reference is the library's own text, read back with ``get_state_json`` and decoded by the
full decoder (``decoding._decode_slow``), which no snapshot touches."""

from __future__ import annotations

import datetime as dt
import math
import threading
from typing import Any, Callable, Dict, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_state import Agent, CodecError, JSONFloat, JSONInt, _snapshot, decoding

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def identical(a: Any, b: Any) -> bool:
    """Same types all the way down, same member order, same exact number texts."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b))
    if isinstance(a, (JSONInt, JSONFloat)):
        return a.json == b.json
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def containers(value: Any) -> List[Any]:
    """Every dict and list in ``value``, itself included."""
    found: List[Any] = []
    if isinstance(value, (dict, list)):
        found.append(value)
        for v in value.values() if isinstance(value, dict) else value:
            found.extend(containers(v))
    return found


def shares_nothing(a: Any, b: Any) -> bool:
    """No dict or list of ``a`` is one of ``b``'s."""
    mine = {id(c) for c in containers(a)}
    return not any(id(c) in mine for c in containers(b))


def reference(agent: Agent) -> Dict[str, Any]:
    value: Dict[str, Any] = decoding._decode_slow(agent.get_state_json())
    return value


def count_predictions(monkeypatch: Any) -> Dict[str, int]:
    """Counts the predictions that held (their text was the library's) and those that did not."""
    counts = {"held": 0, "failed": 0}
    patched = _snapshot._patched

    def counting(snap: Any, patch: Any, text: str) -> Any:
        new = patched(snap, patch, text)
        counts["held" if new is not None else "failed"] += 1
        return new

    monkeypatch.setattr(_snapshot, "_patched", counting)
    return counts


@pytest.fixture
def always_predict(monkeypatch: Any) -> None:
    """Every plain write predicted, whatever the size of its state (the tests' are small)."""
    monkeypatch.setattr(_snapshot, "_PREDICT_MIN", 0)


# Few distinct names, so patches often reach into existing members; "$" names and texts too.
names = st.sampled_from(["a", "b", "c", "é", "k e y", "", "$date", "$x", 'q"\\'])
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),  # beyond 2**53: $bigint, not plain
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(names, inner, max_size=3),
    ),
    max_leaves=8,
)
patch_values = st.recursive(
    st.one_of(st.none(), scalars),
    lambda inner: st.one_of(
        st.lists(st.one_of(scalars, inner), max_size=3),
        st.lists(st.one_of(scalars, inner), max_size=3).map(tuple),
        st.dictionaries(names, inner, max_size=3),
    ),
    max_leaves=8,
)
patches = st.dictionaries(names, patch_values, max_size=4)


@SETTINGS
@given(initial=st.dictionaries(names, documents, max_size=4), patch_list=st.lists(patches, min_size=1, max_size=6))
def test_every_result_is_what_the_text_decodes_to(initial: Dict[str, Any], patch_list: List[Any]) -> None:
    # Every write predicted, whatever the size of its state (these are small).
    shortest, _snapshot._PREDICT_MIN = _snapshot._PREDICT_MIN, 0
    try:
        check_every_result(initial, patch_list)
    finally:
        _snapshot._PREDICT_MIN = shortest


def check_every_result(initial: Dict[str, Any], patch_list: List[Any]) -> None:
    with Agent(":memory:") as agent:
        try:
            agent.replace_state(initial)
        except CodecError:  # {"$date": ...} would read back as a tagged value: refused
            return
        previous = agent.get_state()
        for patch in patch_list:
            try:
                got = agent.set_state(patch)
            except CodecError:  # refused before the library: nothing written
                continue
            want = reference(agent)
            assert identical(got, want), (patch, got, want)
            again = agent.get_state()
            assert identical(again, want)
            assert shares_nothing(got, again) and shares_nothing(again, previous)
            previous = again


def test_a_plain_patch_is_predicted_and_a_state_read_again_is_copied(
    open_agent: Callable[..., Agent], monkeypatch: Any
) -> None:
    counts = count_predictions(monkeypatch)
    agent = open_agent()
    agent.set_state({"small": True})  # below _PREDICT_MIN: decoded, never predicted
    assert counts == {"held": 0, "failed": 0}
    members = {"m%d" % i: {"id": i, "tags": ["x", "y"], "score": 0.5, "text": "t" * 150} for i in range(8)}
    agent.replace_state({"status": "idle", **members})
    assert len(agent.get_state_json()) > _snapshot._PREDICT_MIN
    for i in range(20):
        got = agent.set_state({"status": "s%d" % i, "m1": {"id": i, "score": i + 0.25}, "new%d" % i: [i]})
        assert identical(got, reference(agent))
    # The first write builds the snapshot; each later one is predicted (on both backends).
    assert counts == {"held": 19, "failed": 0}
    snap = agent._cache.snap
    assert snap is not None and snap.text == agent.get_state_json()
    first, second = agent.get_state(), agent.get_state()
    assert agent._cache.snap is snap  # read from it, not rebuilt
    assert identical(first, reference(agent)) and shares_nothing(first, second)


@pytest.mark.usefixtures("always_predict")
def test_what_a_caller_does_to_a_result_stays_out_of_the_next_ones(open_agent: Callable[..., Agent]) -> None:
    agent = open_agent()
    agent.replace_state({"list": [1, [2]], "dict": {"inner": {"x": 1}}, "n": 1})
    for result in (agent.set_state({"n": 2}), agent.get_state(), agent.set_state({"dict": {"y": 2}})):
        result["list"][1].append("mine")
        result["dict"]["inner"]["x"] = "mine"
        result["added"] = True
        assert agent._cache.snap is not None
        assert identical(agent.get_state(), reference(agent))
        assert "mine" not in repr(agent.get_state())


@pytest.mark.usefixtures("always_predict")
def test_another_writer_between_the_calls(open_agent: Callable[..., Agent], db_path: Any) -> None:
    ours = open_agent(db_path)
    theirs = open_agent(db_path)
    ours.replace_state({"a": {"b": 1, "c": [1]}, "d": "x"})
    for i in range(40):
        if i % 3:
            theirs.set_state({"a": {"b": -i}, "e%d" % (i % 5): i})
        got = ours.set_state({"a": {"c": [i]}, "d": "x%d" % i})
        assert identical(got, reference(ours))
        assert identical(ours.get_state(), reference(ours))


@pytest.mark.usefixtures("always_predict")
def test_states_that_are_not_plain_are_decoded_exactly(open_agent: Callable[..., Agent]) -> None:
    agent = open_agent()
    agent.replace_state_json('{"f":1.50,"e":1E2,"z":-0,"big":9007199254740993,"s":"$date"}')
    stamp = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)
    for patch in ({"n": 1}, {"when": stamp}, {"when": None, "big": 2**60}, {"f": None, "e": None, "z": None}):
        for got in (agent.set_state(patch), agent.get_state(), agent.get_state()):
            assert identical(got, reference(agent)), (patch, got)
    assert identical(agent.set_state({"q": 1.5}), reference(agent))


@pytest.mark.usefixtures("always_predict")
def test_a_patch_that_makes_a_tagged_value_of_a_plain_state(open_agent: Callable[..., Agent]) -> None:
    agent = open_agent()
    agent.replace_state({"a": {"b": 1}})
    agent.get_state()
    assert agent._cache.snap is not None
    for patch in ({"a": {"$date": "2026-01-02T00:00:00.000Z", "c": 1}}, {"a": {"b": None, "c": None}}):
        got = agent.set_state(patch)
        assert identical(got, reference(agent)), (patch, got)
    assert isinstance(got["a"], dt.datetime)


@pytest.mark.usefixtures("always_predict")
def test_a_patch_changed_by_a_hook_during_the_call(open_agent: Callable[..., Agent]) -> None:
    agent = open_agent()
    agent.replace_state({"a": 1, "b": {"c": 1}})
    agent.get_state()
    patch: Dict[str, Any] = {"a": 2, "b": {"c": 2}}
    stamp = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)

    for meddled in ({"a": JSONInt("2")}, {"b": {"c": 2, "d": stamp}}, {"b": {"c": JSONFloat("2.0")}}):

        def meddle(next_state: Any, prev: Any, applied: Any) -> None:
            # After the commit, before set_state reads its answer: texts that match (or not),
            # values of other types.
            patch.update(meddled)

        patch.clear()
        patch.update({"a": 2, "b": {"c": 2}})
        hook = agent.on_state_changed(meddle)
        got = agent.set_state(patch)
        hook.remove()
        assert identical(got, reference(agent)) and type(got["a"]) is int
    loop: List[Any] = [1]
    patch.clear()
    patch["a"] = loop

    def cycle(next_state: Any, prev: Any, applied: Any) -> None:
        loop.append(loop)  # the patch now holds itself

    hook = agent.on_state_changed(cycle)
    got = agent.set_state(patch)
    hook.remove()
    assert identical(got, reference(agent)) and got["a"] == [1]


def test_building_snapshots_backs_off_while_they_go_to_waste(
    open_agent: Callable[..., Agent], db_path: Any, monkeypatch: Any
) -> None:
    built = [0]
    build = _snapshot._build

    def counting(text: str) -> Any:
        built[0] += 1
        return build(text)

    monkeypatch.setattr(_snapshot, "_build", counting)
    ours = open_agent(db_path)
    theirs = open_agent(db_path)
    ours.replace_state({"n": 0})
    for i in range(200):
        theirs.set_state({"n": i})  # every text ours sees is new to it
        assert identical(ours.get_state(), reference(ours))
    # Builds at the 1st, 3rd, 7th, 15th... new text: 2, 4, 8... calls apart, then 64.
    assert 5 <= built[0] <= 10
    for _ in range(64):  # the same text again, until the backoff lets a build happen
        ours.get_state()
        if ours._cache.snap is not None:
            break
    assert ours._cache.snap is not None
    assert identical(ours.get_state(), reference(ours))  # a reuse: the backoff starts over
    theirs.set_state({"n": -1})
    before = built[0]
    assert identical(ours.get_state(), reference(ours))
    assert built[0] == before + 1


@pytest.mark.usefixtures("always_predict")
def test_threads_sharing_one_agent(open_agent: Callable[..., Agent]) -> None:
    agent = open_agent()
    agent.replace_state({"shared": {"n": 0}})
    errors: List[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(150):
                got = agent.set_state({"t%d" % n: {"i": i, "l": [n, i]}, "shared": {"n": i}})
                assert got["t%d" % n] == {"i": i, "l": [n, i]} and type(got["shared"]["n"]) is int
                read = agent.get_state()
                assert read["t%d" % n] == {"i": i, "l": [n, i]}
                assert shares_nothing(got, read)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert identical(agent.get_state(), reference(agent))

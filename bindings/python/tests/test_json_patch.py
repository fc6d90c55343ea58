"""RFC 6902 JSON Patch writes (``patch_state`` and its forms) and reads of one place
(``get_path``, ``get_tail``): appends, what hooks, the validator and the change log see,
compare-and-set, every bad input refused with its class and nothing written, the errors'
attributes, and the ``AsyncAgent`` forms. On either backend (the fixtures put the stores on
PostgreSQL in its run)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pickle
import threading
from typing import Any, Callable, Dict, List, Tuple, Type

import pytest

import agent_state
from agent_state import (
    Agent,
    AgentError,
    AsyncAgent,
    BadHandleError,
    Change,
    CodecError,
    ConflictError,
    InvalidArgumentError,
    JSONError,
    LoggedChange,
    PathError,
    RejectedError,
    StateTooLargeError,
    TestFailedError,
)

UTC = dt.timezone.utc


def append(value: Any) -> List[Dict[str, Any]]:
    return [{"op": "add", "path": "/messages/-", "value": value}]


def chat(open_agent: Callable[..., Agent], **options: Any) -> Agent:
    return open_agent(initial_state={"messages": []}, **options)


# -- writes ----------------------------------------------------------------------------------------


def test_appends_return_the_new_state_and_store_codec_values(open_agent: Callable[..., Agent]) -> None:
    a = chat(open_agent)
    at = dt.datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    assert a.patch_state(append({"text": "hi", "at": at})) == {"messages": [{"text": "hi", "at": at}]}
    # A tuple of operations, and a value the codec tags (a datetime, a set).
    state = a.patch_state(({"op": "add", "path": "/messages/-", "value": {"tags": {"x"}}},))
    assert state == {"messages": [{"text": "hi", "at": at}, {"tags": {"x"}}]}
    assert a.get_state() == state
    assert a.get_state_versioned().version == 2
    # The stored text is the codec's: the datetime as a tagged value.
    assert '{"$date":"2024-05-01T12:30:00.000Z"}' in a.get_state_json()
    # A test compares with the value as stored, so a datetime tests equal to itself.
    a.patch_state([{"op": "test", "path": "/messages/0/at", "value": at}])


def test_every_operation_applies_in_order_all_or_nothing(open_agent: Callable[..., Agent]) -> None:
    a = open_agent(initial_state={"a": {"b": 1}, "list": [1, 2, 3]})
    state = a.patch_state(
        [
            {"op": "add", "path": "/c", "value": {"d": [True, None]}},
            {"op": "remove", "path": "/list/0"},
            {"op": "replace", "path": "/a/b", "value": "two"},
            {"op": "move", "from": "/list/0", "path": "/moved"},
            {"op": "copy", "from": "/a", "path": "/copied"},
            {"op": "test", "path": "/copied/b", "value": "two"},
        ]
    )
    assert state == {"a": {"b": "two"}, "list": [3], "c": {"d": [True, None]}, "moved": 2, "copied": {"b": "two"}}
    # The second operation fails: the first is not applied either.
    with pytest.raises(PathError):
        a.patch_state([{"op": "add", "path": "/x", "value": 1}, {"op": "remove", "path": "/nope"}])
    assert "x" not in a.get_state()


def test_a_patch_that_changes_nothing_commits_nothing(open_agent: Callable[..., Agent]) -> None:
    a = open_agent(initial_state={"a": 1})
    a.patch_state([{"op": "add", "path": "/b", "value": 2}])
    seen: List[Change] = []
    a.on_change(seen.append)
    assert a.patch_state([{"op": "test", "path": "/a", "value": 1}]) == {"a": 1, "b": 2}
    assert a.patch_state([{"op": "replace", "path": "/b", "value": 2}]) == {"a": 1, "b": 2}
    assert a.patch_state([]) == {"a": 1, "b": 2}
    assert a.get_state_versioned().version == 1
    assert seen == []


def test_patch_state_json_takes_the_text_as_it_is(open_agent: Callable[..., Agent]) -> None:
    a = chat(open_agent)
    text = a.patch_state_json('[{"op":"add","path":"/messages/-","value":{"n":1.5e3}}]')
    assert json.loads(text) == {"messages": [{"n": 1500.0}]}
    assert a.patch_state_json(b'[{"op":"add","path":"/n","value":7}]') == text[:-1] + ',"n":7}'
    with pytest.raises(TypeError):
        a.patch_state_json(7)  # type: ignore[arg-type]


def test_appends_from_threads_lose_nothing(open_agent: Callable[..., Agent]) -> None:
    a = chat(open_agent)
    threads, each = 4, 25
    errors: List[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(each):
                a.patch_state(append({"t": t, "i": i}))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    messages = a.get_path("/messages")
    assert len(messages) == threads * each
    for t in range(threads):  # each writer's appends in its own order
        assert [m["i"] for m in messages if m["t"] == t] == list(range(each))
    assert a.get_state_versioned().version == threads * each


# -- hooks, the validator, the change log -----------------------------------------------------------


def test_hooks_see_the_kind_and_the_operations(open_agent: Callable[..., Agent]) -> None:
    a = chat(open_agent)
    changes: List[Change] = []
    triples: List[Tuple[Any, Any, Any]] = []
    a.on_change(changes.append)
    a.on_state_changed(lambda next, prev, patch: triples.append((next, prev, patch)))
    at = dt.datetime(2024, 1, 2, tzinfo=UTC)
    ops = append({"text": "hi", "at": at})
    a.patch_state(ops)
    a.set_state({"status": "done"})
    a.replace_state({"messages": []})
    assert [c.kind for c in changes] == ["json_patch", "merge", "replace"]
    first = changes[0]
    # The operations, decoded by the codec (the datetime comes back a datetime).
    assert first.patch == ops
    assert (first.prev, first.next, first.version) == ({"messages": []}, {"messages": [{"text": "hi", "at": at}]}, 1)
    assert triples[0] == (first.next, first.prev, ops)
    assert changes[1].patch == {"status": "done"}
    assert changes[2].patch is None


def test_the_validator_sees_the_operations_and_may_reject_them(open_agent: Callable[..., Agent]) -> None:
    a = chat(open_agent)
    seen: List[Change] = []
    hooked: List[Change] = []
    a.on_change(hooked.append)

    @a.set_validator
    def no_empty_text(change: Change) -> None:
        seen.append(change)
        if change.kind == "json_patch" and any(
            isinstance(op.get("value"), dict) and op["value"].get("text") == "" for op in change.patch or []
        ):
            raise ValueError("a message needs text")

    a.patch_state(append({"text": "hi"}))
    with pytest.raises(RejectedError) as e:
        a.patch_state(append({"text": ""}))
    assert "a message needs text" in e.value.message
    assert isinstance(e.value.__cause__, ValueError)
    assert a.get_state_versioned() == ({"messages": [{"text": "hi"}]}, 1)
    assert [(c.kind, c.version) for c in seen] == [("json_patch", 1), ("json_patch", 2)]
    assert seen[1].patch == append({"text": ""})
    assert [c.version for c in hooked] == [1]


def test_the_change_log_records_the_kind_and_the_operations(open_agent: Callable[..., Agent]) -> None:
    a = chat(open_agent, change_log={"keep_last": 100})
    at = dt.datetime(2024, 3, 4, tzinfo=UTC)
    a.patch_state(append({"at": at}))
    a.set_state({"status": "x"})
    a.replace_state({"messages": []})
    logged = a.changes_since(0)
    assert [(c.version, c.kind) for c in logged] == [(1, "json_patch"), (2, "merge"), (3, "replace")]
    assert logged[0].patch == append({"at": at})
    assert logged[0].next == {"messages": [{"at": at}]}
    entries = json.loads(a.changes_since_json(0))
    assert [e["kind"] for e in entries] == ["json_patch", "merge", "replace"]
    assert entries[0]["patch"] == [{"op": "add", "path": "/messages/-", "value": {"at": {"$date": "2024-03-04T00:00:00.000Z"}}}]
    # Past states are rebuilt from the stored operations.
    assert a.state_at(1) == {"messages": [{"at": at}]}
    assert a.restore(1).state == {"messages": [{"at": at}]}
    # Another handle's JSON Patch is delivered by poll() with its kind.
    other = open_agent(initial_state={"messages": []})
    polled: List[Change] = []
    a.on_change(polled.append)
    other.patch_state(append("from the other"))
    assert a.poll() == 1
    assert [(c.kind, c.patch) for c in polled] == [("json_patch", append("from the other"))]


def test_records_built_without_a_kind_tell_it_from_the_patch() -> None:
    assert Change({}, {}, [{"op": "remove", "path": "/a"}], 1).kind == "json_patch"
    assert Change({}, {}, {"a": 1}, 1).kind == "merge"
    assert Change({}, {}, None, 1).kind == "replace"
    at = dt.datetime(2024, 1, 1, tzinfo=UTC)
    assert LoggedChange(1, at, [{"op": "remove", "path": "/a"}], {}).kind == "json_patch"
    assert LoggedChange(1, at, {"a": 1}, {}).kind == "merge"
    assert LoggedChange(1, at, None, {}).kind == "replace"
    migrated = agent_state._records.new_logged_change(1, at, None, {}, 2, 1)
    assert migrated.kind == "migration"
    kept = agent_state._records.new_logged_change(1, at, None, {}, 0, None, "json_patch")
    assert kept._replace(version=2).kind == "json_patch"


# -- compare-and-set --------------------------------------------------------------------------------


def test_patch_state_if_writes_only_at_the_expected_version(open_agent: Callable[..., Agent]) -> None:
    a = chat(open_agent)
    seen: List[Change] = []
    a.on_change(seen.append)
    assert a.patch_state_if(0, append(1)) == ({"messages": [1]}, 1)
    with pytest.raises(ConflictError) as e:
        a.patch_state_if(0, append(2))
    assert e.value.message.startswith("agent_patch_state_if: ")
    text, version = a.patch_state_if_json(1, '[{"op":"add","path":"/messages/-","value":2}]')
    assert (json.loads(text), version) == ({"messages": [1, 2]}, 2)
    with pytest.raises(ConflictError):
        a.patch_state_if_json(1, "[]")
    assert a.get_state_versioned() == ({"messages": [1, 2]}, 2)
    assert [c.version for c in seen] == [1, 2]
    # The version argument is checked as the other compare-and-set writes check it.
    with pytest.raises(InvalidArgumentError):
        a.patch_state_if(-1, append(3))
    with pytest.raises(TypeError):
        a.patch_state_if("1", append(3))  # type: ignore[arg-type]


# -- bad inputs: each refused with its class, nothing written ---------------------------------------

#: (the operations, or their JSON text for patch_state_json; the class; (operation, op, path) of a
#: PathError or TestFailedError).
BAD: List[Tuple[str, Any, Type[BaseException], Any]] = [
    ("not a sequence", {"op": "remove", "path": "/a"}, TypeError, None),
    ("a str", '[{"op":"remove","path":"/a"}]', TypeError, None),
    ("an int", 7, TypeError, None),
    ("an operation that is not a dict", [1], InvalidArgumentError, None),
    ("an unknown op", [{"op": "bogus", "path": "/a"}], InvalidArgumentError, None),
    ("no op", [{"path": "/a"}], InvalidArgumentError, None),
    ("no path", [{"op": "remove"}], InvalidArgumentError, None),
    ("add without value", [{"op": "add", "path": "/b"}], InvalidArgumentError, None),
    ("move without from", [{"op": "move", "path": "/b"}], InvalidArgumentError, None),
    ("a bad escape", [{"op": "remove", "path": "/a~2"}], InvalidArgumentError, None),
    ("a pointer without /", [{"op": "remove", "path": "a"}], InvalidArgumentError, None),
    ("a result that is not an object", [{"op": "replace", "path": "", "value": [1]}], InvalidArgumentError, None),
    ("a missing member", [{"op": "remove", "path": "/q"}], PathError, (0, "remove", "/q")),
    ("a missing parent", [{"op": "add", "path": "/x/y", "value": 1}], PathError, (0, "add", "/x/y")),
    (
        "an index out of range",
        [{"op": "test", "path": "/a", "value": 1}, {"op": "add", "path": "/list/5", "value": 1}],
        PathError,
        (1, "add", "/list/5"),
    ),
    ("a leading zero", [{"op": "replace", "path": "/list/01", "value": 1}], PathError, (0, "replace", "/list/01")),
    ("a missing from", [{"op": "copy", "from": "/nope", "path": "/b"}], PathError, (0, "copy", "/b")),
    ("a move into its own child", [{"op": "move", "from": "/o", "path": "/o/p"}], PathError, (0, "move", "/o/p")),
    (
        "a failed test",
        [{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 2}],
        TestFailedError,
        (1, "test", "/a"),
    ),
    ("a test of a member that is absent", [{"op": "test", "path": "/zz", "value": 1}], PathError, (0, "test", "/zz")),
    ("a value the codec refuses", append(float("nan")), CodecError, None),
    ("a function", append(len), CodecError, None),
    ("malformed JSON", "json:[{", JSONError, None),
    ("a duplicate member", 'json:[{"op":"remove","path":"/a","path":"/list"}]', CodecError, None),
    ("JSON that is not an array", 'json:{"op":"remove","path":"/a"}', InvalidArgumentError, None),
    ("a result over the cap", append("x" * 5000), StateTooLargeError, None),
    ("a patch over the cap", 'json:[{"op":"test","path":"/a","value":"' + "y" * 5000 + '"}]', StateTooLargeError, None),
]


@pytest.mark.parametrize("what, operations, error, where", BAD, ids=[b[0] for b in BAD])
def test_a_bad_patch_raises_its_error_and_writes_nothing(
    open_agent: Callable[..., Agent], what: str, operations: Any, error: Any, where: Any
) -> None:
    a = open_agent(initial_state={"a": 1, "list": [0], "o": {}}, max_value_bytes=4096)
    a.patch_state([{"op": "add", "path": "/messages", "value": []}])
    seen: List[Change] = []
    a.on_change(seen.append)
    before = a.get_state_versioned()
    with pytest.raises(error) as e:
        if isinstance(operations, str) and operations.startswith("json:"):
            a.patch_state_json(operations[len("json:"):])
        else:
            a.patch_state(operations)
    if isinstance(e.value, AgentError):
        assert e.value.status == type(e.value).default_status
    if where is not None:
        assert (e.value.operation, e.value.op, e.value.path) == where  # type: ignore[union-attr]
        assert f"operation {where[0]} ({where[1]} " in e.value.message  # type: ignore[union-attr]
    assert a.get_state_versioned() == before
    assert seen == []
    # The compare-and-set form refuses it the same way.
    if not (isinstance(operations, str) and operations.startswith("json:")):
        with pytest.raises(error):
            a.patch_state_if(before.version, operations)
        assert a.get_state_versioned() == before


def test_a_closed_agent_raises_bad_handle(open_agent: Callable[..., Agent]) -> None:
    a = chat(open_agent)
    a.close()
    for call in (
        lambda: a.patch_state(append(1)),
        lambda: a.patch_state_json("[]"),
        lambda: a.patch_state_if(0, append(1)),
        lambda: a.patch_state_if_json(0, "[]"),
        lambda: a.get_path(""),
        lambda: a.get_tail("/messages", 1),
    ):
        with pytest.raises(BadHandleError):
            call()


# -- reads of one place -----------------------------------------------------------------------------


def test_get_path_reads_one_place(open_agent: Callable[..., Agent]) -> None:
    at = dt.datetime(2024, 6, 7, tzinfo=UTC)
    a = open_agent(initial_state={"messages": [{"text": "hi", "at": at}], "a/b": {"c~d": 1}, "": 2})
    # The initial state while nothing is stored, and nothing is written by reading it.
    assert a.get_path("") == a.get_state()
    assert a.get_path("/messages/0/at") == at
    assert a.get_path("/messages/0") == {"text": "hi", "at": at}
    assert a.get_path("/a~1b/c~0d") == 1
    assert a.get_path("/") == 2
    assert a.get_path_json("/messages/0/text") == '"hi"'
    assert a.get_path_json("/messages/0/at") == '{"$date":"2024-06-07T00:00:00.000Z"}'
    assert a.get_state_versioned().version == 0
    # A fresh value each time.
    first = a.get_path("/messages")
    first.append("mine")
    assert a.get_path("/messages") == [{"text": "hi", "at": at}]


def test_get_tail_reads_the_last_elements(open_agent: Callable[..., Agent]) -> None:
    a = chat(open_agent)
    for i in range(5):
        a.patch_state(append({"i": i}))
    assert a.get_tail("/messages", 1) == [{"i": 4}]
    assert a.get_tail("/messages", 2) == [{"i": 3}, {"i": 4}]
    assert a.get_tail("/messages", 0) == []
    assert a.get_tail("/messages", 50) == [{"i": i} for i in range(5)]
    assert a.get_tail("/messages", 2**70) == [{"i": i} for i in range(5)]
    assert a.get_tail_json("/messages", 1) == '[{"i":4}]'


GET_ERRORS: List[Tuple[str, Callable[[Agent], Any], Type[BaseException], Any]] = [
    ("a missing member", lambda a: a.get_path("/nope"), PathError, "/nope"),
    ("a missing nested member", lambda a: a.get_path("/messages/0/nope"), PathError, "/messages/0/nope"),
    ("an index out of range", lambda a: a.get_path("/messages/9"), PathError, "/messages/9"),
    ("a leading zero", lambda a: a.get_path("/messages/00"), PathError, "/messages/00"),
    ("the place after the end", lambda a: a.get_path("/messages/-"), PathError, "/messages/-"),
    ("a tail of nothing", lambda a: a.get_tail("/nope", 1), PathError, "/nope"),
    ("the json form", lambda a: a.get_path_json("/nope"), PathError, "/nope"),
    ("no leading /", lambda a: a.get_path("messages"), InvalidArgumentError, None),
    ("a bad escape", lambda a: a.get_path("/a~2"), InvalidArgumentError, None),
    ("a lone surrogate", lambda a: a.get_path("/\ud800"), InvalidArgumentError, None),
    ("a tail of an object", lambda a: a.get_tail("/messages/0", 1), InvalidArgumentError, None),
    ("a tail of a number", lambda a: a.get_tail("/n", 1), InvalidArgumentError, None),
    ("a negative count", lambda a: a.get_tail("/messages", -1), InvalidArgumentError, None),
    ("a count that is not an int", lambda a: a.get_tail("/messages", 1.0), TypeError, None),
    ("a bool count", lambda a: a.get_tail("/messages", True), TypeError, None),
    ("a pointer that is not a str", lambda a: a.get_path(b"/messages"), TypeError, None),
]


@pytest.mark.parametrize("what, read, error, path", GET_ERRORS, ids=[g[0] for g in GET_ERRORS])
def test_a_read_of_nothing_raises(
    open_agent: Callable[..., Agent], what: str, read: Callable[[Agent], Any], error: Type[BaseException], path: Any
) -> None:
    a = open_agent(initial_state={"messages": [{"text": "hi"}], "n": 1})
    with pytest.raises(error) as e:
        read(a)
    if isinstance(e.value, PathError):
        assert (e.value.operation, e.value.op, e.value.path) == (None, None, path)
        assert isinstance(e.value, LookupError)
    assert a.get_state_versioned().version == 0


# -- the errors' attributes -------------------------------------------------------------------------


def test_the_new_statuses_have_their_classes() -> None:
    assert agent_state.AGENT_ERR_PATH == 17 and agent_state.AGENT_ERR_TEST_FAILED == 18
    assert type(agent_state.errors.error_for_status(17, "m")) is PathError
    assert type(agent_state.errors.error_for_status(18, "m")) is TestFailedError
    assert agent_state.errors.status_name(17) == "AGENT_ERR_PATH"
    assert agent_state.errors.status_name(18) == "AGENT_ERR_TEST_FAILED"


@pytest.mark.parametrize(
    "message, where",
    [
        ('agent_patch_state: no such path: operation 1 (remove "/q"): the path does not exist', (1, "remove", "/q")),
        ('test failed: operation 12 (test "/a~1b"): the value is 1, not 2', (12, "test", "/a~1b")),
        (r'no such path: operation 0 (add "/q\"x\\y\n\u{1f}é"): gone', (0, "add", '/q"x\\y\n\x1fé')),
        ('no such path: operation 0 (add ""): gone', (0, "add", "")),
        ("no such path: operation 3 (move): gone", (3, "move", None)),
        ("no such path: operation 4: gone", (4, None, None)),
        ('no such path: the state has no value at "/nope"', (None, None, None)),
        ("", (None, None, None)),
    ],
)
def test_operation_and_path_are_read_from_the_message(message: str, where: Tuple[Any, Any, Any]) -> None:
    for cls in (PathError, TestFailedError):
        err = cls(message)
        assert (err.operation, err.op, err.path) == where
        # A pickled error is rebuilt with the same attributes.
        copy = pickle.loads(pickle.dumps(err))
        assert type(copy) is cls and (copy.operation, copy.op, copy.path) == where


# -- AsyncAgent ---------------------------------------------------------------------------------------


def test_the_async_forms(open_async: Callable[..., AsyncAgent]) -> None:
    async def main() -> None:
        a = open_async(initial_state={"messages": []}, change_log={"keep_last": 10})
        seen: List[Tuple[str, Any]] = []

        async def hook(change: Change) -> None:
            seen.append((change.kind, change.patch))

        a.on_change(hook)
        assert await a.patch_state(append("one")) == {"messages": ["one"]}
        assert json.loads(await a.patch_state_json('[{"op":"add","path":"/messages/-","value":"two"}]')) == {
            "messages": ["one", "two"]
        }
        assert await a.patch_state_if(2, append("three")) == ({"messages": ["one", "two", "three"]}, 3)
        text, version = await a.patch_state_if_json(3, '[{"op":"remove","path":"/messages/0"}]')
        assert (json.loads(text), version) == ({"messages": ["two", "three"]}, 4)
        with pytest.raises(ConflictError):
            await a.patch_state_if(0, append("x"))
        with pytest.raises(TestFailedError) as e:
            await a.patch_state([{"op": "test", "path": "/messages/0", "value": "one"}])
        assert (e.value.operation, e.value.path) == (0, "/messages/0")
        assert await a.get_path("/messages/1") == "three"
        assert await a.get_path_json("/messages") == '["two","three"]'
        assert await a.get_tail("/messages", 1) == ["three"]
        assert await a.get_tail_json("/messages", 5) == '["two","three"]'
        with pytest.raises(PathError):
            await a.get_path("/nope")
        assert [c.kind for c in await a.changes_since(0)] == ["json_patch"] * 4
        assert [kind for kind, _ in seen] == ["json_patch"] * 4
        assert seen[0][1] == append("one")

    asyncio.run(main())

"""The ctypes declarations of ``_native.py`` against the C header, include/agent_state.h.

The declarations are written by hand; this checks them: every ``agent_*`` function of the header
is declared (``argtypes`` and ``restype``, the C types mapped as below), no function is declared
that the header lacks, the callback types (``CFUNCTYPE``) match the header's function pointer
typedefs, the structs (``AgentBuffer``, ``AgentStateChange``, ``AgentCall``,
``AgentCompletion``, ``AgentWatchEvent``) have the header's fields in its
order with matching types, and the status codes are the header's.

C types and their ctypes (a ``const`` makes no difference):

    int32_t, AgentStatus      c_int32        uint64_t, AgentHandle   c_uint64
    int64_t                   c_int64        AgentCancel             c_uint64
    uint32_t                  c_uint32       int                     c_int
    size_t                    c_size_t       void (return)           None
    void *                    c_void_p       const char *            c_char_p
    const uint8_t *           c_char_p, c_void_p or POINTER(c_uint8) (the same pointer ABI:
                              the binding passes bytes as c_char_p, reads structs as c_void_p)
    T * (any other)           POINTER(T's ctypes), e.g. struct AgentBuffer * -> POINTER(AgentBuffer)
    a function pointer typedef   a CFUNCTYPE type with the typedef's restype and argtypes

On LP64 Linux ctypes makes some of these one type (c_size_t and c_uint64 are both c_ulong), so
the check holds them to the ABI, which is what a declaration has to get right.

The header is the repository's (the test file's ../../../include); outside a checkout (an
unpacked sdist, an installed copy of the tests) there is none, and the tests are skipped.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterator, List, Optional, Tuple

import pytest

from agent_state import _native, errors

HEADER = Path(__file__).resolve().parents[3] / "include" / "agent_state.h"

#: (the type's words without const/struct, its number of '*')
CType = Tuple[Tuple[str, ...], int]


class Header:
    """What the tests need of the header: its functions, function pointer typedefs, structs,
    plain typedefs and status codes."""

    def __init__(self, text: str) -> None:
        self.statuses: Dict[str, int] = {
            m.group(1): int(m.group(2)) for m in re.finditer(r"^#define (AGENT_(?:OK|ERR_\w+)) (\d+)$", text, re.M)
        }
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"//[^\n]*", " ", text)
        text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
        text = text.replace('extern "C" {', " ")
        self.structs: Dict[str, List[Tuple[str, CType]]] = {}
        for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
            assert m.group(1) == m.group(3), m.group(0)
            self.structs[m.group(1)] = [parse_decl(f) for f in m.group(2).split(";") if f.strip()]
        text = re.sub(r"typedef\s+struct\s+\w+\s*\{.*?\}\s*\w+\s*;", " ", text, flags=re.S)
        self.fn_types: Dict[str, Tuple[CType, List[CType]]] = {}
        for m in re.finditer(r"typedef\s+([^;()]+?)\(\s*\*\s*(\w+)\s*\)\s*\(([^)]*)\)\s*;", text):
            self.fn_types[m.group(2)] = (parse_type(m.group(1)), parse_params(m.group(3)))
        text = re.sub(r"typedef\s+[^;()]+?\(\s*\*\s*\w+\s*\)\s*\([^)]*\)\s*;", " ", text)
        self.typedefs: Dict[str, CType] = {}
        for m in re.finditer(r"typedef\s+([^;(){}]+?)\b(\w+)\s*;", text):
            self.typedefs[m.group(2)] = parse_type(m.group(1))
        text = re.sub(r"typedef\s+[^;(){}]+?;", " ", text)
        self.functions: Dict[str, Tuple[CType, List[CType]]] = {}
        for m in re.finditer(r"([^;(){}]+?)\b(agent_\w+)\s*\(([^)]*)\)\s*;", text):
            self.functions[m.group(2)] = (parse_type(m.group(1)), parse_params(m.group(3)))
        text = re.sub(r"[^;(){}]+?\bagent_\w+\s*\([^)]*\)\s*;", " ", text)
        rest = re.sub(r"[\s}]", "", text)
        assert not rest, f"parts of the header these tests do not understand: {rest[:200]!r}"


def parse_type(text: str) -> CType:
    tokens = re.findall(r"\w+|\*", text)
    words = tuple(t for t in tokens if t not in ("*", "const", "struct"))
    return words, tokens.count("*")


def parse_decl(text: str) -> Tuple[str, CType]:
    """``const uint8_t *data`` -> ("data", (("uint8_t",), 1))."""
    m = re.fullmatch(r"\s*(.*?)\b(\w+)\s*", text, re.S)
    assert m, text
    return m.group(2), parse_type(m.group(1))


def parse_params(text: str) -> List[CType]:
    if text.strip() in ("", "void"):
        return []
    return [parse_decl(p)[1] for p in text.split(",")]


@pytest.fixture(scope="module")
def header() -> Header:
    if not HEADER.is_file():
        pytest.skip(f"no C header at {HEADER}: not a checkout of the repository (an unpacked sdist?)")
    return Header(HEADER.read_text("utf-8"))


@pytest.fixture(scope="module")
def declared() -> Iterator[Dict[str, Any]]:
    """The function objects ``_native._declare`` makes, on a CDLL of their own (so that what it
    touched is all there is in its ``__dict__``); the module's globals it sets are put back."""
    names = [n for n in vars(_native) if n.startswith("_hot_") or n in ("_lib_last_error", "_buffer_free")]
    saved = {n: getattr(_native, n) for n in names}
    lib = ctypes.CDLL(_native.library_path())
    try:
        _native._declare(lib)
    finally:
        for n, v in saved.items():
            setattr(_native, n, v)
    yield {n: f for n, f in vars(lib).items() if n.startswith("agent_")}


def ctypes_for(header: Header, t: CType, where: str) -> FrozenSet[Any]:
    """The ctypes types a declaration may use for the C type ``t``."""
    words, stars = t
    if len(words) != 1:
        raise AssertionError(f"{where}: unexpected C type {' '.join(words)}")
    (name,) = words
    if name in header.typedefs:  # AgentStatus -> int32_t, AgentHandle -> uint64_t
        inner, inner_stars = header.typedefs[name]
        return ctypes_for(header, (inner, inner_stars + stars), where)
    if stars == 0:
        scalars = {"int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
                   "uint32_t": ctypes.c_uint32, "int": ctypes.c_int, "size_t": ctypes.c_size_t,
                   "void": None, "uint8_t": ctypes.c_uint8}
        if name in scalars:
            return frozenset([scalars[name]])
        if name in header.fn_types:
            return frozenset([("CFUNCTYPE", name)])
        if name in header.structs:  # a struct member of a struct (AgentCompletion.state)
            struct = getattr(_native, name, None)
            assert struct is not None, f"{where}: _native has no ctypes.Structure {name}"
            return frozenset([struct])
        raise AssertionError(f"{where}: no ctypes mapping for C type {name}")
    if stars == 1:
        if name == "void":
            return frozenset([ctypes.c_void_p])
        if name == "char":
            return frozenset([ctypes.c_char_p])
        if name == "uint8_t":
            return frozenset([ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint8)])
        if name in header.structs:
            struct = getattr(_native, name, None)
            assert struct is not None, f"{where}: _native has no ctypes.Structure {name}"
            return frozenset([ctypes.POINTER(struct)])
    pointee = ctypes_for(header, ((name,), stars - 1), where)
    return frozenset(ctypes.POINTER(p) for p in pointee if p is not None and not isinstance(p, tuple))


def check_type(header: Header, declared_type: Any, t: CType, where: str) -> Optional[str]:
    """None if ``declared_type`` is a right ctypes type for ``t``, else what is wrong."""
    allowed = ctypes_for(header, t, where)
    for a in allowed:
        if isinstance(a, tuple):  # a function pointer typedef: a CFUNCTYPE with its signature
            fn_type = header.fn_types[a[1]]
            if not (isinstance(declared_type, type) and issubclass(declared_type, ctypes._CFuncPtr)):
                return f"{where}: {declared_type!r} is not a CFUNCTYPE type (the header's {a[1]})"
            problems = check_signature(header, declared_type._restype_, declared_type._argtypes_, fn_type,
                                       f"{where} ({a[1]})")
            if problems:
                return "; ".join(problems)
            if declared_type._flags_ & ctypes._FUNCFLAG_CDECL != ctypes._FUNCFLAG_CDECL:
                return f"{where}: {declared_type!r} is not a cdecl CFUNCTYPE"
            return None
    if declared_type in allowed:
        return None
    names = sorted(getattr(a, "__name__", repr(a)) for a in allowed)
    return f"{where}: declared {getattr(declared_type, '__name__', repr(declared_type))}, the header's " \
           f"{' '.join(t[0])}{' ' + '*' * t[1] if t[1] else ''} wants {' or '.join(names)}"


def check_signature(header: Header, restype: Any, argtypes: Any, c: Tuple[CType, List[CType]],
                    where: str) -> List[str]:
    ret, params = c
    problems: List[str] = []
    if argtypes is None:
        return [f"{where}: no argtypes declared"]
    if len(argtypes) != len(params):
        problems.append(f"{where}: {len(argtypes)} argtypes declared, the header has {len(params)} parameters")
    for i, (a, p) in enumerate(zip(argtypes, params)):
        problem = check_type(header, a, p, f"{where} parameter {i + 1}")
        if problem:
            problems.append(problem)
    problem = check_type(header, restype, ret, f"{where} return type")
    if problem:
        problems.append(problem)
    return problems


def test_the_header_parses(header: Header) -> None:
    # (a parser that found nothing would make the other tests pass vacuously)
    assert len(header.functions) >= 20 and "agent_open" in header.functions
    assert set(header.structs) == {"AgentBuffer", "AgentStateChange", "AgentCall", "AgentCompletion", "AgentWatchEvent"}
    assert set(header.fn_types) == {
        "AgentStateChangedFn", "AgentFreeFn", "AgentInitialStateFn", "AgentValidateFn", "AgentSchemaStepFn",
        "AgentDoneFn", "AgentWatchFn",
    }
    assert header.typedefs == {
        "AgentStatus": (("int32_t",), 0),
        "AgentHandle": (("uint64_t",), 0),
        "AgentCancel": (("uint64_t",), 0),
        "AgentQueue": (("uint64_t",), 0),
        "AgentWatch": (("uint64_t",), 0),
        "AgentWatchKind": (("int32_t",), 0),
    }
    assert header.functions["agent_set_state"] == (
        (("AgentStatus",), 0),
        [(("AgentHandle",), 0), (("uint8_t",), 1), (("size_t",), 0), (("AgentBuffer",), 1)],
    )


def test_every_header_function_is_declared_as_the_header_says(header: Header, declared: Dict[str, Any]) -> None:
    problems: List[str] = []
    for name, signature in sorted(header.functions.items()):
        fn = declared.get(name)
        if fn is None:
            problems.append(f"{name}: in the header, not declared in _native.py")
            continue
        problems += check_signature(header, fn.restype, fn.argtypes, signature, name)
    assert not problems, "\n".join(problems)


def test_no_function_is_declared_that_the_header_lacks(header: Header, declared: Dict[str, Any]) -> None:
    extra = sorted(set(declared) - set(header.functions))
    assert extra == [], f"declared in _native.py, not in the header: {extra}"


def test_status_functions_have_the_errcheck(header: Header, declared: Dict[str, Any]) -> None:
    # (the module's promise: every function returning an AgentStatus raises on failure)
    status_functions = [n for n, (ret, _) in header.functions.items() if ret == (("AgentStatus",), 0)]
    assert status_functions
    assert [n for n in status_functions if declared[n].errcheck is not _native._errcheck] == []
    others = [n for n in header.functions if n not in status_functions]
    assert [n for n in others if getattr(declared[n], "errcheck", None) is _native._errcheck] == []


def test_the_hot_function_objects_have_the_same_declarations(header: Header) -> None:
    _native.library()
    hot = {n: f for n, f in vars(_native).items() if n.startswith("_hot_")}
    assert hot and all(f is not None for f in hot.values())
    problems: List[str] = []
    for var, fn in sorted(hot.items()):
        assert fn.__name__ in header.functions, f"{var} is {fn.__name__}, which the header lacks"
        problems += check_signature(header, fn.restype, fn.argtypes, header.functions[fn.__name__], var)
        if getattr(fn, "errcheck", None) is not None:
            problems.append(f"{var}: has an errcheck (the hot path checks the status itself)")
    assert not problems, "\n".join(problems)


def test_the_callback_types_match_the_header_typedefs(header: Header) -> None:
    pairs = {
        "AgentStateChangedFn": _native.STATE_CHANGED_FN,
        "AgentInitialStateFn": _native.INITIAL_STATE_FN,
        "AgentValidateFn": _native.VALIDATE_FN,
        "AgentSchemaStepFn": _native.SCHEMA_STEP_FN,
        "AgentFreeFn": _native.FREE_FN,
        "AgentDoneFn": _native.DONE_FN,
        "AgentWatchFn": _native.WATCH_FN,
    }
    assert set(pairs) == set(header.fn_types)
    problems: List[str] = []
    for typedef, fn_type in pairs.items():
        problem = check_type(header, fn_type, ((typedef,), 0), typedef)
        if problem:
            problems.append(problem)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ["AgentBuffer", "AgentStateChange", "AgentCall", "AgentCompletion", "AgentWatchEvent"])
def test_struct_layouts_match_the_header(header: Header, name: str) -> None:
    struct = getattr(_native, name)
    assert issubclass(struct, ctypes.Structure)
    fields = struct._fields_
    assert [f[0] for f in fields] == [f[0] for f in header.structs[name]], f"{name}: field names or order"
    problems = [check_type(header, ftype, ctype, f"{name}.{fname}")
                for (fname, ftype), (_, ctype) in zip(fields, header.structs[name])]
    assert [p for p in problems if p] == []
    assert not getattr(struct, "_pack_", 0), f"{name}: the header's structs are not packed"


def test_status_codes_match_the_header(header: Header) -> None:
    assert len(header.statuses) >= 14
    assert {n: getattr(errors, n, None) for n in header.statuses} == header.statuses
    defined = {n for n in vars(errors) if re.fullmatch(r"AGENT_(OK|ERR_\w+)", n)}
    assert sorted(defined - set(header.statuses)) == []


def test_call_ops_and_flags_match_the_header() -> None:
    if not HEADER.is_file():
        pytest.skip(f"no C header at {HEADER}")
    found = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^#define AGENT_((?:OP|CALL)_\w+) (\d+)", HEADER.read_text("utf-8"), re.M)
    }
    assert len(found) >= 6
    assert {n: getattr(_native, n, None) for n in found} == found

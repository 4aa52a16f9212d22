"""Each Lua script's header is its contract: the KEYS and ARGV it takes, in order, and
what it returns. These tests hold every script in pressure/lua/ to its header: each
KEYS[n] / ARGV[n] is bound once, to a named local, at the top of the script; the body
uses those names (never the index again); every documented argument is bound, and every
bound or indexed one is documented. A variadic tail ('KEYS[8..]', 'ARGV[7..]') is
documented when, and only when, the body reads the arrays beyond the named part.
The scripts are also loaded on a private server, as pressure assembles them (lib.lua,
then the items functions of each kind, then the script), so that none fails to compile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from pressure._packing import _LIBRARY_HERE, _script_sha, _script_source

LUA = Path(__file__).resolve().parent.parent / "pressure" / "lua"
#: Put in front of every script, not scripts themselves: no KEYS/ARGV header.
LIBRARIES = ("lib.lua", "items_list.lua", "items_zset.lua")
SCRIPTS = sorted(p.name for p in LUA.glob("*.lua") if p.name not in LIBRARIES)

_DOC = re.compile(r"^-- (KEYS|ARGV)\[(\d+)(\.\.)?\]\s+- \S")
_INDEX = re.compile(r"\b(KEYS|ARGV)\[(\d+)\]")
_VARIADIC = re.compile(r"#(KEYS|ARGV)\b|unpack\((KEYS|ARGV)\b|\b(KEYS|ARGV)\[[^]\d]")
_BINDING = re.compile(r"^local ([\w, ]+?) = (.+)$")
_DECLARED = re.compile(r"\blocal\s+(?:function\s+(\w+)|([\w\s,]+?)\s*(?:=|$))", re.M)


def _strip_comment(line: str) -> str:
    """The code of a line, without its '--' comment (no script has '--' inside a string)."""
    return line.split("--", 1)[0]


def _declared_names(code: str) -> set[str]:
    """The names `code` declares as locals or local functions, at any depth."""
    names: set[str] = set()
    for fn, plain in _DECLARED.findall(code):
        names.update([fn] if fn else [n.strip() for n in plain.split(",")])
    return names


@dataclass
class Script:
    name: str
    header: list[str]
    bindings: list[tuple[int, str, str]]  # (line number, local name, expression)
    body: list[tuple[int, str]]  # (line number, code without comments) after the bindings
    documented: dict[str, set[int]] = field(default_factory=dict)
    variadic_from: dict[str, int] = field(default_factory=dict)


def _parse(name: str, folder: Path = LUA) -> Script:
    lines = (folder / name).read_text("utf-8").splitlines()
    i = 0
    while i < len(lines) and lines[i].startswith("--"):
        i += 1
    header = lines[:i]
    bindings: list[tuple[int, str, str]] = []
    while i < len(lines) and (m := _BINDING.match(_strip_comment(lines[i]).rstrip())) \
            and _INDEX.search(lines[i]):
        names = [n.strip() for n in m.group(1).split(",")]
        exprs = [e.strip() for e in m.group(2).split(",")]
        assert len(names) == len(exprs), f"{name}:{i + 1}: one value per name in a binding"
        bindings += [(i + 1, n, e) for n, e in zip(names, exprs)]
        i += 1
    body = [(n + 1, _strip_comment(line)) for n, line in enumerate(lines) if n >= i]
    script = Script(name, header, bindings, body, {"KEYS": set(), "ARGV": set()})
    for line in header:
        if m := _DOC.match(line):
            kind, n = m.group(1), int(m.group(2))
            if m.group(3):
                assert kind not in script.variadic_from, f"{name}: two tails of {kind}"
                script.variadic_from[kind] = n
            else:
                assert n not in script.documented[kind], f"{name}: {kind}[{n}] documented twice"
                script.documented[kind].add(n)
    return script


def test_every_script_is_checked() -> None:
    assert len(SCRIPTS) >= 20 and "put.lua" in SCRIPTS and "get.lua" in SCRIPTS


def _check_header(s: Script) -> None:
    name = s.name
    assert any(line.startswith("-- return") for line in s.header), f"{name}: no '-- return' in the header"
    for kind, numbers in s.documented.items():
        # documented in order, from 1, with no gap; a tail starts right after them
        assert numbers == set(range(1, len(numbers) + 1)), f"{name}: {kind} documented {sorted(numbers)}"
        if kind in s.variadic_from:
            assert s.variadic_from[kind] == len(numbers) + 1, f"{name}: {kind}'s tail starts after a gap"


def _check_bindings(s: Script) -> None:
    name = s.name
    bound: dict[str, list[int]] = {"KEYS": [], "ARGV": []}
    for line, local, expr in s.bindings:
        found = _INDEX.findall(expr)
        assert len(found) == 1, f"{name}:{line}: {local} = {expr} binds one argument"
        kind, n = found[0][0], int(found[0][1])
        assert n in s.documented[kind], f"{name}:{line}: {kind}[{n}] is bound but not in the header"
        bound[kind].append(n)
    for kind, numbers in s.documented.items():
        # in the header's order, each once
        assert bound[kind] == sorted(numbers), (
            f"{name}: {kind} bound as {bound[kind]}, header {sorted(numbers)}")


def _check_indexes(s: Script) -> None:
    name = s.name
    for line, code in s.body:
        for kind, n in _INDEX.findall(code):
            tail = s.variadic_from.get(kind)
            assert tail is not None and int(n) >= tail, (
                f"{name}:{line}: {kind}[{n}] in the body: use its named local"
                if int(n) in s.documented[kind] else f"{name}:{line}: {kind}[{n}] is not in the header")


def _check_tail(s: Script) -> None:
    name = s.name
    code = "\n".join(c for _, c in s.body)
    for kind in ("KEYS", "ARGV"):
        reads_tail = any(kind in (m.group(1), m.group(2), m.group(3)) for m in _VARIADIC.finditer(code))
        reads_tail = reads_tail or any(k == kind and int(n) not in s.documented[kind]
                                       for k, n in _INDEX.findall(code))
        assert reads_tail == (kind in s.variadic_from), (
            f"{name}: the body {'reads' if reads_tail else 'never reads'} {kind} beyond the named "
            f"ones, the header {'documents' if kind in s.variadic_from else 'has'} no {kind}[n..]")


def _library_names() -> set[str]:
    """What the libraries declare at their top level (and the loader's LIFO): being part
    of the same chunk, a script's own names must not shadow them."""
    names = {"LIFO"}
    for lib in LIBRARIES:
        lines = (LUA / lib).read_text("utf-8").splitlines()
        names |= _declared_names("\n".join(_strip_comment(l) for l in lines if l.startswith("local ")))
    return names


LIBRARY_NAMES = _library_names()


def _check_names(s: Script) -> None:
    name = s.name
    code = "\n".join(c for _, c in s.body)
    declared = _declared_names(code)
    names = [local for _, local, _ in s.bindings]
    assert len(set(names)) == len(names), f"{name}: a name bound twice"
    for local in names:
        assert local not in LIBRARY_NAMES, f"{name}: {local} shadows a function or local of the libraries"
        assert local not in declared, f"{name}: {local} is declared again in the body"
    for local in names:
        assert re.search(rf"\b{local}\b", code), f"{name}: {local} is bound but never used"


CHECKS = [_check_header, _check_bindings, _check_indexes, _check_tail, _check_names]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("_check_"))
@pytest.mark.parametrize("name", SCRIPTS)
def test_script_matches_its_header(name: str, check: Callable[[Script], None]) -> None:
    check(_parse(name))


#: The bench's floor scripts (pressure/bench/_floor.py): held to the same header rules.
BENCH = LUA.parent / "bench"


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("_check_"))
@pytest.mark.parametrize("name", sorted(p.name for p in BENCH.glob("*.lua")))
def test_bench_script_matches_its_header(name: str, check: Callable[[Script], None]) -> None:
    check(_parse(name, BENCH))


def test_library_names_are_seen() -> None:
    assert {"counter", "fail", "keep_permit", "items_len", "items_pop", "ITEM_ARGS", "LIFO"} <= LIBRARY_NAMES


def test_the_checks_catch_a_wrong_header(tmp_path: Path) -> None:
    """The parser sees what it must: an undocumented index, a missing binding, an index
    used in the body, an undocumented tail, a binding never used, a library name shadowed."""
    (tmp_path / "bad.lua").write_text(
        "-- Bad.\n-- KEYS[1] - :bound\n-- KEYS[2] - :closed\n-- ARGV[1] - x\n-- ARGV[2] - y\n-- return 1\n"
        "local bound_key = KEYS[1]\nlocal x, counter = ARGV[1], ARGV[2]\n"
        "redis.call('GET', KEYS[3], bound_key, ARGV[1], counter)\nfor i = 2, #KEYS do end\nreturn 1\n")
    s = _parse("bad.lua", tmp_path)
    assert s.documented == {"KEYS": {1, 2}, "ARGV": {1, 2}} and not s.variadic_from
    assert [b[1] for b in s.bindings] == ["bound_key", "x", "counter"]
    _check_header(s)
    with pytest.raises(AssertionError, match=r"KEYS bound as \[1\], header \[1, 2\]"):
        _check_bindings(s)
    with pytest.raises(AssertionError, match=r"KEYS\[3\] is not in the header"):
        _check_indexes(s)
    with pytest.raises(AssertionError, match=r"reads KEYS beyond"):
        _check_tail(s)
    with pytest.raises(AssertionError, match="counter shadows"):
        _check_names(s)
    s.bindings = s.bindings[:2]
    with pytest.raises(AssertionError, match="x is bound but never used"):
        _check_names(s)
    s.body = [(9, "redis.call('GET', ARGV[1])")]
    with pytest.raises(AssertionError, match=r"ARGV\[1\] in the body: use its named local"):
        _check_indexes(s)
    s.body = [(9, "local n = 1"), (10, "local bound_key = redis.call('LLEN', bound_key, x)")]
    with pytest.raises(AssertionError, match="bound_key is declared again in the body"):
        _check_names(s)


@pytest.mark.parametrize("kind", ["fifo", "lifo", "priority"])
def test_every_script_compiles_as_assembled(r: redis.Redis, kind: str) -> None:
    """lib.lua + the kind's items functions + the script: one chunk, within Lua's limits
    (200 locals, 60 upvalues), loaded by SCRIPT LOAD (which compiles it)."""
    if kind == "fifo":
        items = (LUA / "items_list.lua").read_text("utf-8")
    else:
        items = (f"local LIFO = {'true' if kind == 'lifo' else 'false'}\n"
                 + (LUA / "items_zset.lua").read_text("utf-8"))
    for name in SCRIPTS:
        text = "\n".join(((LUA / "lib.lua").read_text("utf-8"), items, (LUA / name).read_text("utf-8")))
        assert len(r.script_load(text)) == 40, name
        # and as it is sent: with the definitions of the libraries it uses only
        sent = _script_source(name.removesuffix(".lua") + ("" if kind == "fifo" else "@" + kind))
        assert r.script_load(sent) == _script_sha(name.removesuffix(".lua") + ("" if kind == "fifo" else "@" + kind))


_CODE_WORD = re.compile(r"\w+")
_STRING_OR_COMMENT = re.compile(r"""'[^'\n]*'|"[^"\n]*"|--[^\n]*""")


@pytest.mark.parametrize("kind", ["fifo", "lifo", "priority"])
@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_is_sent_with_the_library_definitions_it_uses(name: str, kind: str) -> None:
    """Each library definition is a closure or a value made on every call of a script that
    carries it: a script is sent with those it uses, directly or through one another, and
    no other. Every library name its code mentions (outside strings and comments) is
    defined before it; none defined is unused."""
    source = _script_source(name.removesuffix(".lua") + ("" if kind == "fifo" else "@" + kind))
    script = (LUA / name).read_text("utf-8")
    # a script's fast exits may come before the library (_LIBRARY_HERE): they use none of it
    prologue, marker, rest = script.partition(_LIBRARY_HERE)
    if not marker:
        prologue, rest = "", script
    assert source.startswith(prologue) and source.endswith(marker + rest)
    library = source[len(prologue):-len(marker + rest)]
    defined = re.findall(r"^local (?:function (\w+)\(|(\w+) = )", library, re.MULTILINE)
    defined_names = [a or b for a, b in defined]
    assert len(set(defined_names)) == len(defined_names)
    prologue_code = set(_CODE_WORD.findall(_STRING_OR_COMMENT.sub(" ", prologue)))
    assert not prologue_code & LIBRARY_NAMES, sorted(prologue_code & LIBRARY_NAMES)
    code_words = set(_CODE_WORD.findall(_STRING_OR_COMMENT.sub(" ", source)))
    assert code_words & LIBRARY_NAMES <= set(defined_names), name
    mentioned = set(_CODE_WORD.findall(_STRING_OR_COMMENT.sub(" ", script)))
    for definition in defined_names:  # used by the script, or by another definition it carries
        uses = [other for other in (*defined_names, None) if other != definition]
        assert definition in mentioned or any(
            re.search(rf"\b{definition}\b", _STRING_OR_COMMENT.sub(" ", _definition_text(library, other)))
            for other in uses if other), f"{name}: {definition} is sent but never used"


def _definition_text(library: str, name: str) -> str:
    """The text of definition ``name`` in an assembled library (to its 'end', or its line)."""
    start = re.search(rf"^local (?:function {name}\(|{name} = )", library, re.MULTILINE)
    assert start
    if not start.group(0).startswith("local function"):
        return library[start.start():library.index("\n", start.start())]
    return library[start.start():library.index("\nend", start.start()) + 4]


def _call_arguments(code: str) -> list[str]:
    """The arguments of every redis.call / redis.pcall in ``code`` (top-level commas only)."""
    found = []
    for m in re.finditer(r"redis\.p?call\(", code):
        depth, j, parts, cur = 1, m.end(), [], ""
        while j < len(code) and depth:
            ch = code[j]
            depth += ch in "({[" and 1 or (-1 if ch in ")}]" else 0)
            if depth and ch == "," and depth == 1:
                parts.append(cur)
                cur = ""
            elif depth:
                cur += ch
            j += 1
        found += [*parts, cur]
    return found


@pytest.mark.parametrize("name", sorted(p.name for p in LUA.glob("*.lua")))
def test_constants_go_to_commands_as_text(name: str) -> None:
    """A Lua number passed to a command goes through printf (%.17g): ~2,300 instructions, more
    than INCR itself. A constant argument is written as text ('0', not 0)."""
    code = "\n".join(_strip_comment(line) for line in (LUA / name).read_text("utf-8").splitlines())
    numbers = [a.strip() for a in _call_arguments(code) if re.fullmatch(r"\s*-?\d+\s*", a)]
    assert not numbers, f"{name}: redis.call with the number(s) {numbers}: write them as text"
    assert _call_arguments("redis.call('LRANGE', k, 0, f(1, 2)) redis.pcall('X', '1')") == [
        "'LRANGE'", " k", " 0", " f(1, 2)", "'X'", " '1'"]


def test_a_library_definition_must_end_at_the_start_of_a_line() -> None:
    from pressure._packing import _used

    assert _used("local function a()\n  return 1\nend\nlocal function b()\n  return a()\nend\n",
                 "return b()") == ["local function a()\n  return 1\nend\n", "local function b()\n  return a()\nend\n"]
    assert _used("-- one\nlocal function a()\nend\n-- two\nlocal B = 1\n", "return B") == ["-- two\nlocal B = 1\n"]
    with pytest.raises(ValueError, match="'a' has no 'end'"):
        _used("local function a()\n  return 1 end\n", "return a()")


def test_errors_are_raised_as_strings() -> None:
    """error({err = ...}) breaks Redis 6.2's error handler (it concatenates the error with its
    position): a script stops with lib.lua's fail(message), or returns redis.error_reply."""
    for path in sorted(LUA.glob("*.lua")):
        code = "\n".join(_strip_comment(line) for line in path.read_text("utf-8").splitlines())
        assert not re.search(r"\berror\s*\(\s*(\{|redis\.error_reply)", code), path.name


# -- the Python side: pressure/_scripts.py binds each script once ---------------------------

_NAMED_KEY = re.compile(r"^-- KEYS\[(\d+)\]\s+- (:[\w:]+)")
_NUMBER = re.compile(r"(?<![\w\[.])-?\d+\b")


def _bindings() -> list[Any]:
    from pressure import _scripts

    return [*_scripts.QUEUE_SCRIPTS, *_scripts.OTHER_SCRIPTS]


def _sources(binding: Any, kind: str) -> tuple[Any, ...]:
    """What a binding builds its fixed KEYS from, as pressure's callers pass it."""
    from pressure._scripts import QueueScript
    from pressure.keys import ExecutorKeys, QueueKeys

    k = QueueKeys.build("p", "q", kind)
    if isinstance(binding, QueueScript):
        return (k,)
    e = ExecutorKeys.build("p", "e")
    inflight = QueueKeys.build("p", e.tasks).inflight("w")
    log = f"{k.logs}:g"
    return {"touch": (), "wake": (k,), "restore": (k.producer_free, k.producer), "submit": (e,), "claim": (e, inflight),
            "count_start": (e,),
            "settle": (e, inflight, QueueKeys.build("p", e.tasks)), "cancel": (e,),
            "log_append": (k.inflight("c"), log, f"{log}:tail", k.producer, k.logs, k.meta),
            "log_commit": (log, f"{log}:committed"), "log_read": (log, f"{log}:committed")}[binding.name]


def test_every_script_has_one_binding() -> None:
    names = [b.name for b in _bindings()]
    assert sorted(names) == sorted(n.removesuffix(".lua") for n in SCRIPTS)


@pytest.mark.parametrize("binding", _bindings(), ids=lambda b: b.name)
@pytest.mark.parametrize("kind", ["fifo", "lifo", "priority"])
def test_binding_matches_its_scripts_header(binding: Any, kind: str) -> None:
    """A binding passes as many KEYS as its script's header names (fixed, then those of each
    call; at least as many, and a tail only where the header has one), each named key the key
    the header names, as many ARGV as the header names (a tail where, and only where, the header
    has one), and each of its status codes is one the header returns."""
    s = _parse(binding.name + ".lua")
    fixed = binding.keys(*_sources(binding, kind))
    keys = (*fixed, *(f"p:per-call:{name}" for name in binding.call_keys))
    named = len(s.documented["KEYS"])
    assert sorted(s.documented["KEYS"]) == list(range(1, named + 1))
    assert binding.more_keys == ("KEYS" in s.variadic_from)
    if binding.more_keys:
        assert len(keys) >= named and s.variadic_from["KEYS"] == named + 1 and not binding.call_keys
    else:
        assert len(keys) == named
    assert len(set(keys)) == len(keys), "a key passed twice"
    for line in s.header:
        if m := _NAMED_KEY.match(line):
            assert keys[int(m.group(1)) - 1].endswith(m.group(2)), line
    assert len(binding.argv) == len(s.documented["ARGV"])
    assert (binding.more_argv is not None) == ("ARGV" in s.variadic_from)
    if binding.more_argv is not None:
        assert s.variadic_from["ARGV"] == len(binding.argv) + 1
    returns = "\n".join(s.header[next(i for i, line in enumerate(s.header) if "return" in line):])
    codes = {int(n) for n in _NUMBER.findall(returns)}
    for status in binding.status or ():
        assert status.value in codes, f"{binding.name}: {status!r} is not in its header's return"
    command = binding.command(*_sources(binding, kind), variant="" if kind == "fifo" else "@" + kind)
    per_call = [*keys[len(fixed):], *binding.argv]
    assert command.pack(per_call).count(b"\r\n$") == 3 + len(keys) + len(binding.argv)


def test_a_binding_refuses_a_wrong_argument_count() -> None:
    from pressure._scripts import ACK, CLOSE, PUT
    from pressure.keys import QueueKeys

    k = QueueKeys.build("p", "q")
    with pytest.raises(TypeError, match="close takes 2 arguments"):
        CLOSE.run(None, k, "", "only one")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ack takes keys per call"):
        ACK.run(None, k, "", *"12")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="put takes 8 arguments"):
        PUT.call(None, PUT.keys(k), tuple("12345"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes no more arguments"):
        CLOSE.command(k, more=1)
    with pytest.raises(TypeError, match="put takes 8 more arguments"):
        PUT.command(k).pack(["1"])


def test_put_and_get_share_the_codes_queue_raises_for() -> None:
    """Queue._raise_for reads put.lua's and get.lua's results alike."""
    from pressure._scripts import GetStatus, PutStatus

    for name in ("BUSY", "CLOSED", "NO_QUEUE", "NEGATIVE"):
        assert PutStatus[name] == GetStatus[name], name

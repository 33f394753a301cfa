#!/usr/bin/env python3
"""The tests of tests/api that start the built function, for `make
check-qemu-tests`: every one of them must be in QEMU_TESTS, the filters
`make test-arm64-qemu` runs under qemu, or the arm64 bootstrap goes untested
by it.

A test starts the built function when it reaches `helpers::built_function`
through the functions of tests/api. The calls are read from the sources,
not from a compiler: a free function is found by its name in its own
module, else among those its module imports (every one, for a glob
import); a method by its type (`Type::name`, `Self::name`), and a method
call (`.name(`) by its name alone, which reaches every method of that name.
Reading more calls than there are makes the check stricter, never blind.

    qemu_tests.py              # the names of those tests, one a line, as libtest lists them
"""

import pathlib
import re
import sys

ROOT = pathlib.Path("tests/api")
START = ("free", "helpers", "built_function")
CALL = re.compile(
    r"(\.|\b([A-Z][A-Za-z0-9_]*|Self)::|\b([a-z_][a-z0-9_]*)::|\b)([a-z_][A-Za-z0-9_]*)\s*(?:::<[^>]*>)?\s*\("
)
IMPL = re.compile(r"^impl\b[^{;]*?\b([A-Z][A-Za-z0-9_]*)\s*(?:<[^{;]*?>)?\s*(?:where[^{]*)?\{", re.M)
FN = re.compile(r"\bfn\s+([a-z_][A-Za-z0-9_]*)")
TEST = re.compile(r"#\[(?:tokio::)?test\b")
USE = re.compile(r"^use\s+(?:crate|super)::[^;]*;", re.M)


class Everything:
    """What a glob import brings: any name."""

    def __contains__(self, _name):
        return True


def code(text):
    """The code alone: comments, strings and character literals emptied."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            i = text.find("*/", i) + 2
        elif (
            c == "r"
            and re.match(r'r#*"', text[i : i + 10])
            and not (i and (text[i - 1].isalnum() or text[i - 1] == "_"))
        ):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            i = text.find('"' + hashes, i + len(hashes) + 2) + len(hashes) + 1
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(?:\\.[^']*|[^'\\])'", text[i : i + 12]):
            i = text.find("'", i + 2 if text[i + 1] == "\\" else i + 1) + 1
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(text, i):
    """The index of the brace that closes the one at `i`."""
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return j
    return len(text)


def module(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] in ("mod", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def read(root):
    """Every function's calls, each test's name and key, each module's imports."""
    functions, tests, imported = {}, [], {}
    for path in sorted(root.rglob("*.rs")):
        text = code(path.read_text())
        here = module(path)
        uses = " ".join(USE.findall(text))
        imported[here] = Everything() if "*" in uses else set(re.findall(r"\b[a-z_][A-Za-z0-9_]*\b", uses))
        impls = [(m.start(), block_end(text, m.end() - 1), m.group(1)) for m in IMPL.finditer(text)]
        for m in FN.finditer(text):
            brace, semi = text.find("{", m.end()), text.find(";", m.end())
            if brace < 0 or 0 <= semi < brace:
                continue
            body = text[brace : block_end(text, brace) + 1]
            owner = next((kind for start, end, kind in impls if start < m.start() < end), None)
            calls = set()
            for call in CALL.finditer(body):
                dot, kind, path_, name = call.groups()
                if dot == ".":
                    calls.add(("method", None, name))
                elif kind:
                    calls.add(("method", owner if kind == "Self" else kind, name))
                elif path_:
                    calls.add(("path", path_, name))
                else:
                    calls.add(("free", here, name))
            key = ("method", owner, m.group(1)) if owner else ("free", here, m.group(1))
            functions.setdefault(key, set()).update(calls)
            attributes = text[max(0, m.start() - 300) : m.start()].rsplit(";", 1)[-1].rsplit("}", 1)[-1]
            if not owner and TEST.search(attributes):
                tests.append((f"{here}::{m.group(1)}", key))
    return functions, tests, imported


def callees(call, functions, imported):
    kind, where, name = call
    if kind == "free":
        if call in functions:
            return [call]
        if name in imported.get(where, ()):
            return [key for key in functions if key[0] == "free" and key[2] == name]
        return []
    if kind == "path":
        return [key for key in functions if key[0] == "free" and key[2] == name and key[1].split("::")[-1] == where]
    return [key for key in functions if key[0] == "method" and key[2] == name and where in (None, key[1])]


def starters(root=ROOT):
    functions, tests, imported = read(root)
    starts = {START}
    changed = True
    while changed:
        changed = False
        for key, calls in functions.items():
            if key not in starts and any(
                found in starts for call in calls for found in callees(call, functions, imported)
            ):
                starts.add(key)
                changed = True
    return [name for name, key in tests if key in starts]


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(__doc__)
    names = starters()
    if not names:
        sys.exit(f"no test of {ROOT} reaches helpers::built_function: has it moved?")
    print("\n".join(names))

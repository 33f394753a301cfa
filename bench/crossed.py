#!/usr/bin/env python3
"""Which of the project's source files a warm create runs code from, and
how long they are: what a reader following a create walks. Reads a
callgrind dump of bench/profile.py's window (a build with line tables,
so that code inlined from one file into another is still counted where
it is written), and counts each file with instructions in the window up
to its first `#[cfg(test)]`.

    bench/profile.py --binary target/release/plant-store --out /tmp/ps
    bench/crossed.py /tmp/ps/callgrind.out.*.1

`--root` is the checkout the build was made from (the paths in the line
tables), this one by default.
"""

import argparse
import os
import re

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE = re.compile(r"^(fl|fi|fe)=(?:\((\d+)\))? ?(.*)$")


def instructions_by_file(dump):
    """Self instructions per source file. Callgrind names a file once
    (`fl=(3) path`) and by number after; `fi=`/`fe=` switch to the file an
    inlined line comes from; the cost line after `calls=` is the callee's
    inclusive cost, already counted where the callee's own lines are."""
    names, totals, function_file, current, skip, line_number = {}, {}, None, None, False, 0
    with open(dump) as f:
        for line in f:
            match = FILE.match(line)
            if match:
                kind, number, name = match.groups()
                if name and number:
                    names[number] = name
                current = names.get(number) if number else name
                if kind == "fl":
                    function_file = current
                continue
            if line.startswith("fn="):
                # A function's own lines are in its `fl=` file until an
                # `fi=`/`fe=` says otherwise.
                current = function_file
                continue
            if line.startswith("calls="):
                skip = True
                continue
            if line[:1].isdigit() or line[:1] in "+-*":
                if skip:
                    skip = False
                    continue
                parts = line.split()
                position = parts[0]
                if position.startswith(("+", "-")):
                    line_number += int(position)
                elif position != "*":
                    line_number = int(position)
                # Line 0 is code the compiler made without a source line
                # (drop glue, a state machine's dispatch): nobody wrote it.
                if len(parts) >= 2 and current and line_number > 0:
                    totals[current] = totals.get(current, 0) + int(parts[1])
    return totals


def lines_before_tests(path):
    """Every line up to the first `#[cfg(test)]`: code, comments and blanks."""
    count = 0
    with open(path) as f:
        for line in f:
            if line.strip().startswith("#[cfg(test)]"):
                break
            count += 1
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dump", help="a callgrind dump of a window of creates (bench/profile.py)")
    parser.add_argument("--root", default=HERE, help="the checkout the build was made from")
    args = parser.parse_args()
    root = os.path.abspath(args.root) + os.sep
    ours = {}
    for name, count in instructions_by_file(args.dump).items():
        path = name if os.path.isabs(name) else os.path.join(root, name)
        if count > 0 and path.startswith(root) and path.endswith(".rs") and os.path.isfile(path):
            relative = os.path.relpath(path, root)
            ours[relative] = ours.get(relative, 0) + count
    total = sum(ours.values())
    lines = 0
    for relative in sorted(ours):
        length = lines_before_tests(os.path.join(root, relative))
        lines += length
        print(f"{length:6} lines  {100 * ours[relative] / total:5.1f} %  {relative}")
    print(f"{len(ours)} files, {lines:,} lines")


if __name__ == "__main__":
    main()

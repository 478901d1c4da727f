#!/usr/bin/env python3
"""Checks (and with --fix fixes) the include guard of every C++ header.

The rule: the guard of a header is TRAINSCOPE_ followed by its path,
uppercased, every character that is not a letter or a digit turned into "_",
and a trailing "_", where the path is

  - under include/trainscope/ for public headers:
        include/trainscope/stats/time_stats.hpp -> TRAINSCOPE_STATS_TIME_STATS_HPP_
  - from the repository root for every other header (src/, tools/, bindings/, tests/):
        src/common/files.hpp                    -> TRAINSCOPE_SRC_COMMON_FILES_HPP_
        bindings/python/py_timers.hpp           -> TRAINSCOPE_BINDINGS_PYTHON_PY_TIMERS_HPP_

and the header has the form

  // comments (optional)
  #ifndef GUARD
  #define GUARD
  ...
  #endif  // GUARD

Usage: check-header-guards.py [--fix] [--root DIR] [FILE ...]
Without FILEs, every *.hpp and *.h under include/, src/, tools/, bindings/ and
tests/ of the repository (DIR, default: this script's repository). Exits 1 and
lists the headers that break the rule (with what is wrong) unless --fix fixed
them all.
"""

import argparse
import os
import re
import sys

DIRECTORIES = ("include", "src", "tools", "bindings", "tests")
EXTENSIONS = (".hpp", ".h")
PUBLIC_PREFIX = "include/trainscope/"

IFNDEF = re.compile(r"#\s*ifndef\s+(\w+)\s*$")
DEFINE = re.compile(r"#\s*define\s+(\w+)\s*$")
ENDIF = re.compile(r"#\s*endif\b(.*)$")


def expected_guard(relative_path):
    """The guard of the header at `relative_path` (from the repository root, "/" separated)."""
    path = relative_path
    if path.startswith(PUBLIC_PREFIX):
        path = path[len(PUBLIC_PREFIX):]
    return "TRAINSCOPE_" + re.sub(r"[^A-Za-z0-9]", "_", path).upper() + "_"


def _code_lines(lines):
    """Indices of the lines that are neither blank nor // comments."""
    return [i for i, line in enumerate(lines)
            if line.strip() and not line.lstrip().startswith("//")]


def check(text, guard):
    """(problem, fixed_text): problem is None when `text` follows the rule; fixed_text is
    None when the header cannot be fixed automatically (no guard structure to rename)."""
    lines = text.split("\n")
    code = _code_lines(lines)
    if len(code) < 3:
        return "no include guard", None
    first, second, last = code[0], code[1], code[-1]
    ifndef = IFNDEF.match(lines[first].strip())
    define = DEFINE.match(lines[second].strip())
    endif = ENDIF.match(lines[last].strip())
    if not ifndef or not define or not endif or ifndef.group(1) != define.group(1):
        return ("no include guard (#ifndef X / #define X first, #endif last)",
                None)
    found = ifndef.group(1)
    comment = endif.group(1).strip()
    if found == guard and comment == f"// {guard}":
        return None, text
    problem = (f"guard {found}, expected {guard}" if found != guard
               else f"#endif comment \"{comment}\", expected \"// {guard}\"")
    lines[first] = f"#ifndef {guard}"
    lines[second] = f"#define {guard}"
    lines[last] = f"#endif  // {guard}"
    return problem, "\n".join(lines)


def headers_under(root):
    for directory in DIRECTORIES:
        top = os.path.join(root, directory)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(EXTENSIONS):
                    yield os.path.join(dirpath, name)


def main(argv):
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fix", action="store_true", help="rewrite wrong guards in place")
    parser.add_argument("--root", default=default_root, help="the repository root")
    parser.add_argument("files", nargs="*", help="headers to check (default: all)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    files = [os.path.abspath(f) for f in args.files] or list(headers_under(root))
    if not files:
        print(f"check-header-guards: no headers under {root}", file=sys.stderr)
        return 2

    broken = 0
    for path in files:
        relative = os.path.relpath(path, root).replace(os.sep, "/")
        if relative.startswith("../"):
            print(f"{path}: not under {root}", file=sys.stderr)
            broken += 1
            continue
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        problem, fixed = check(text, expected_guard(relative))
        if problem is None:
            continue
        if args.fix and fixed is not None:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(fixed)
            print(f"{relative}: fixed: {problem}")
            continue
        broken += 1
        print(f"{relative}: {problem}" + ("" if fixed is not None else " (fix by hand)"))
    if broken:
        print(f"check-header-guards: {broken} of {len(files)} headers break the rule "
              f"(scripts/check-header-guards.py --fix renames guards)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""A search-space file without one of its sections, on stdout: the A arm of an A/B of a
sketch rule (`benches/cpu_ab.sh` with SPACE_A, `benches/space_ab.sh`).

  space_without.py FILE SECTION
  e.g. benches/space_without.py search_spaces/cpu.toml lane_reduction >/tmp/a.toml
"""
import sys

path, section = sys.argv[1], sys.argv[2]
out, skipping = [], False
for line in open(path).read().splitlines(keepends=True):
    if line.startswith("["):
        skipping = line.strip() == f"[{section}]"
    if not skipping:
        out.append(line)
if len(out) == len(open(path).read().splitlines()):
    sys.exit(f"{path}: no section [{section}]")
sys.stdout.write("".join(out))

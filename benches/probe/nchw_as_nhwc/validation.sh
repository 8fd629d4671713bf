#!/usr/bin/env bash
# The validation set's NCHW convs (benches/validation.toml) by issue 14's protocol
# (benches/validation_gpus.sh, 300 trials, a 150 s limit each) with the default space,
# each best timed against cuDNN: what call 4 of this probe's RESULTS section ran.
#   benches/probe/nchw_as_nhwc/validation.sh OUT
set -u
set=$(mktemp --suffix .toml)
python3 - "$set" <<'PY'
import sys, tomllib
d = tomllib.load(open("benches/validation.toml", "rb"))
with open(sys.argv[1], "w") as f:
    for e in d["conv"]:
        if e["workload"].startswith("conv2d_nchw"):
            f.write('[[conv]]\nworkload = "%s"\n\n' % e["workload"])
PY
TESSEL_SET=$set bash "$(dirname "$0")/../../validation_gpus.sh" "$1" 150 300 conv

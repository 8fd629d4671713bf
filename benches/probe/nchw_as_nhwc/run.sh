#!/usr/bin/env bash
# Each conv of set.toml tuned by issue 14's protocol (benches/validation_gpus.sh: the
# shipped records and their model in a base database, 300 trials, the default search),
# NCHW and NHWC alike, then timed against cuDNN on the same layout.
#   benches/probe/nchw_as_nhwc/run.sh OUT [SECONDS]
TESSEL_SET=$(dirname "$0")/set.toml exec bash "$(dirname "$0")/../../validation_gpus.sh" "$1" "${2:-150}" 300 conv

#!/usr/bin/env bash
# Snakemake runs this inside the new environment, from the workflow's working directory.
# dgpbench is not on conda channels: install it from $DGPBENCH_SOURCE, by default the working
# directory (the clone itself for `make run`; set DGPBENCH_SOURCE when --directory differs).
set -euo pipefail
python -m pip install --no-deps "${DGPBENCH_SOURCE:-.}"

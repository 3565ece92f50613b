#!/usr/bin/env bash
# The capacity model (bench/capacity/model.py, docs/capacity.md) on fixed inputs: outputs
# equal the ones worked out by hand; missing or unusable inputs are refused with the reason
# (capacity_model_check.py).
source "$(dirname "$0")/lib.sh"
python3 "$(dirname "$0")/capacity_model_check.py" "$TEST_TMP" || _status=1
finish

#!/usr/bin/env bash
# Every C file is clang-formatted (.clang-format): `make format` fixes it.
source "$(dirname "$0")/lib.sh"
check "C sources are clang-formatted (run make format)" make -s format-check
finish

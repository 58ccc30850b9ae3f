#!/usr/bin/env bash
# Sourced by the setup scripts: "does this binary report the version we pinned?", asked so that it
# gives the same answer every time. The binary's whole output is read into a variable before it is
# looked at. The tempting `binary --version | grep -q …` fails by chance under `set -o pipefail`:
# grep exits at its first match, the binary is killed by SIGPIPE while still writing, and the
# pipeline reports failure although the version was right (etcd 3.4's `--version` failed that way
# in 6 of 40 runs). tests/tools/setup_checks.test.ts runs these checks many times against the real
# binaries and lints every script for the pattern.

# reports_line <expected line> <command...>: true when the command exits 0 and one line of its
# standard output is exactly <expected line>.
reports_line() {
  local expected="$1" output
  output="$("${@:2}" 2>/dev/null)" || return 1
  [[ $'\n'"$output"$'\n' == *$'\n'"$expected"$'\n'* ]]
}

# reports_text <expected text> <command...>: true when the command exits 0 and its standard output
# contains <expected text> anywhere.
reports_text() {
  local expected="$1" output
  output="$("${@:2}" 2>/dev/null)" || return 1
  [[ "$output" == *"$expected"* ]]
}

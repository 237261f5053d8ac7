#!/usr/bin/env bash
# Runs the test tiers one after another (unit, integration, e2e, chaos), printing each tier's
# wall time, then a summary; exits non-zero if any tier failed. Extra arguments go to pytest.
# The unit tier starts with `lint-imports` (the layer contracts in pyproject.toml) and ruff (its
# lint rules and formatting, in pyproject.toml): a broken contract, a lint finding or an
# unformatted file fails the tier. All three run even when one fails, so one run reports every
# finding.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
summary=()
for tier in unit integration e2e chaos; do
  started=$(date +%s)
  lint_rc=0
  if [ "$tier" = unit ]; then
    for check in "lint-imports" "ruff check ." "ruff format --check ."; do
      # shellcheck disable=SC2086  # the check's words are its command and arguments
      .venv/bin/$check || lint_rc=1
    done
  fi
  parallel=()
  [ "$tier" = unit ] && parallel=(-n auto)  # unit tests share nothing; the others share the stack
  .venv/bin/pytest "tests/$tier" "${parallel[@]}" --durations=30 "$@"
  rc=$?
  [ $rc -eq 5 ] && rc=0  # a tier with no test selected is not a failure
  [ $rc -eq 0 ] && [ $lint_rc -ne 0 ] && rc=$lint_rc
  elapsed=$(( $(date +%s) - started ))
  line=$(printf 'tier %-12s %5d s  %s' "$tier" "$elapsed" "$([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")")
  echo "$line"
  summary+=("$line")
  [ $rc -ne 0 ] && status=1
done
printf '%s\n' "--- wall time by tier ---" "${summary[@]}"
exit $status

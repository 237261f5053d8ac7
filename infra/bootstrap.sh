#!/usr/bin/env bash
# Installs what webgym-streams needs on a bare Debian machine; re-runnable, fast when done.
#   - Debian packages: Chromium (+ fonts), and a JDK and Maven when missing.
#   - .venv/ with this package and its test extras (reinstalled when pyproject.toml changes).
# Kafka jars and the MinIO build are fetched by `webgym up` itself, into the user cache dir.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium fonts-liberation)
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v go >/dev/null 2>&1; then
  echo "bootstrap: Go 1.24+ is needed to build the local MinIO server; install it (https://go.dev/doc/install) and re-run." >&2
  exit 1
fi

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "bootstrap: Python 3.11+ is needed ($python is $("$python" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv"
  "$python" -m venv .venv
fi
stamp=$(cat pyproject.toml infra/constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.installed 2>/dev/null)" != "$stamp" ]; then
  echo "bootstrap: installing Python packages into .venv (first time: a minute or two)"
  # uv installs the pinned set from its cache (~/.cache/uv): seconds once it holds the wheels,
  # where pip unpacks gigabytes (torch and its CUDA libraries) every time. System certificates,
  # as pip uses them here.
  .venv/bin/python -m pip install -q -c infra/constraints.txt uv
  UV_NATIVE_TLS=1 .venv/bin/uv pip install -q --python .venv/bin/python \
    -c infra/constraints.txt -e '.[test]'
  echo "$stamp" > .venv/.installed
fi

#!/usr/bin/env bash
# Install Python packages into a virtual environment (made when missing): with uv when it can be
# had, with pip otherwise. uv installs the test environments (.venv, .venv-vllm, .venv-litellm)
# several times faster than pip, which is most of `make test`'s install time on a clean clone.
# uv does not read pip's configuration, so pip's find-links, index URLs and constraints (files and
# PIP_* variables, as `pip config list` shows them) are passed on to it, and it resolves what pip
# would (a machine whose PyTorch lies on disk, say). uv comes from PATH, else from PyPI into
# build/uv (once, under a lock: several installs may start at once). If uv cannot be had, or its
# install fails, pip does the install. RVGUARD_PIP=1 forces pip.
# Usage: scripts/pyinstall.sh VENV PIP_INSTALL_ARGS...
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$1"
shift
PYTHON="${PYTHON:-python3}"

# The path of a uv binary, or nothing.
find_uv() {
    if [ -n "${RVGUARD_PIP:-}" ]; then
        return 0
    fi
    if command -v uv >/dev/null 2>&1; then
        command -v uv
        return 0
    fi
    local boot="$HERE/build/uv"
    mkdir -p "$HERE/build"
    # --target, not a venv of its own: a venv's own pip takes half a minute to set up on a busy machine
    if (
        flock 9
        [ -x "$boot/bin/uv" ] || "$PYTHON" -m pip install -q --root-user-action=ignore --target "$boot" uv
    ) 9>"$HERE/build/uv.lock" >&2 && [ -x "$boot/bin/uv" ]; then
        echo "$boot/bin/uv"
    fi
}

# pip's own settings (its configuration files and PIP_* variables) as uv arguments.
uv_settings() {
    local line key val v
    while IFS= read -r line; do
        key="${line%%=*}"
        key="${key#*.}"
        val="${line#*=}"
        val="${val#\'}"
        val="${val%\'}"
        val="${val//\\n/ }"
        case "$key" in
        find-links) for v in $val; do printf '%s\0' --find-links "$v"; done ;;
        # (uv skips a file:// index whose URL lacks the final slash, and pip reads it either way)
        index-url) printf '%s\0' --index-url "${val%/}/" ;;
        extra-index-url) for v in $val; do printf '%s\0' --extra-index-url "${v%/}/"; done ;;
        constraint) for v in $val; do printf '%s\0' --constraint "$v"; done ;;
        esac
    done < <("$PYTHON" -m pip config list 2>/dev/null || true)
}

UV="$(find_uv)"
if [ -n "$UV" ]; then
    # uv's venv has no pip of its own: it comes with the install below (the tests and `make compiled`
    # run the venv's pip), and a venv with pip takes half a minute to make on a busy machine
    test -x "$VENV/bin/python" || "$UV" venv -q --python "$(command -v "$PYTHON")" "$VENV"
    mapfile -d '' SETTINGS < <(uv_settings)
    # pip looks in every index for the best version; uv's default stops at the first that has the name.
    # --compile-bytecode: pip writes the .pyc files at install, uv does not; where PYTHONDONTWRITEBYTECODE
    # is set (this machine's environment), no process writes them later either, so every process would compile
    # every module it imports from source: a vLLM engine's start took 55 s instead of 26 s, `rvguard
    # verify` 0.62 s instead of 0.39 s (measured 2026-12-06).
    if "$UV" pip install -q --compile-bytecode --python "$VENV/bin/python" --index-strategy unsafe-best-match \
        "${SETTINGS[@]}" --upgrade-package pip pip "$@"; then
        exit 0
    fi
    echo "pyinstall: uv failed to install $* into $VENV; trying pip" >&2
else
    echo "pyinstall: uv is not available; installing with pip" >&2
fi
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip --version >/dev/null 2>&1 || "$VENV/bin/python" -m ensurepip -q
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "$@"

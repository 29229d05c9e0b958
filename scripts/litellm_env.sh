#!/usr/bin/env bash
# Create the LiteLLM proxy environment for tests/integrations, when missing: a separate venv
# with LiteLLM's proxy (a large dependency tree, kept apart from the project's .venv) and rvguard
# installed editable with its `litellm` extra. Idempotent: a stamp file marks success.
# Usage: scripts/litellm_env.sh [VENV_DIR]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-${RVGUARD_LITELLM_VENV:-$HERE/.venv-litellm}}"
LITELLM_SPEC="${RVGUARD_LITELLM_SPEC:-litellm[proxy]==1.108.7}"
STAMP="$VENV/.rvguard-ready"

if [ -f "$STAMP" ]; then
    exit 0
fi
echo "litellm_env: creating $VENV with $LITELLM_SPEC (about 1 min)" >&2
# pip, not uv: where two indexes hold the same version (a machine's local mirrors), pip takes the best
# wheel among them and uv the first index's; for soundfile that was a pure wheel without libsndfile,
# and LiteLLM's proxy failed to import
RVGUARD_PIP=1 bash "$HERE/scripts/pyinstall.sh" "$VENV" "$LITELLM_SPEC" -e "$HERE[gateway]"
LITELLM_LOCAL_MODEL_COST_MAP=True "$VENV/bin/python" -c \
    "import litellm.proxy.proxy_server, rvguard.integrations.litellm_hook; print('litellm ready')" >&2
touch "$STAMP"
echo "litellm_env: ready ($VENV)" >&2

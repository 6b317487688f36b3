#!/usr/bin/env bash
# `make worker`: a Celery worker for the current environment. It needs a broker
# (CELERY_BROKER_URL, or REDIS_URL which it defaults to) and the same DATABASE_URL as the web
# processes; runs only reach it when the web side uses COPILOT_RUNTIME_EXECUTOR=celery.
#
# Environment:
#   SKIP_INSTALL=1  use the existing .venv as is
#   CELERY_ARGS     extra arguments for `celery worker` (e.g. "--concurrency 2")
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

if [ -z "${CELERY_BROKER_URL:-}" ] && [ -z "${REDIS_URL:-}" ]; then
    die "a Celery worker needs a broker: set REDIS_URL (or CELERY_BROKER_URL), e.g. REDIS_URL=redis://127.0.0.1:6379/0"
fi

if [ -n "${SKIP_INSTALL:-}" ]; then
    require_venv
else
    ensure_venv runtime
fi

# shellcheck disable=SC2086  # CELERY_ARGS is deliberately word-split.
exec "$VENV_DIR/bin/celery" -A copilot_runtime.site worker -l info ${CELERY_ARGS:-}

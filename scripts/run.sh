#!/usr/bin/env bash
# `make run`: serve the runtime on the embedded default (SQLite file db.sqlite3, in-memory
# channel layer, inline executor), so a fresh clone needs nothing but Python (3.11 to 3.14).
#
# Environment:
#   HOST, PORT      where uvicorn listens (default 127.0.0.1:8000)
#   SKIP_INSTALL=1  use the existing .venv as is (no venv creation, no pip install)
#   DATABASE_URL, REDIS_URL, ...  honoured as usual (see copilot_runtime/site/settings.py); unset
#                   they give the embedded default.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"

if [ -n "${SKIP_INSTALL:-}" ]; then
    require_venv
else
    ensure_venv runtime
fi

log "python manage.py migrate --noinput"
"$VENV_PYTHON" manage.py migrate --noinput
log "python manage.py seed_model_prices (prices you set in the admin are kept)"
"$VENV_PYTHON" manage.py seed_model_prices

if ! "$VENV_PYTHON" manage.py shell -c \
    "from django.contrib.auth import get_user_model as m; raise SystemExit(0 if m().objects.filter(is_superuser=True).exists() else 1)" \
    >/dev/null 2>&1; then
    log "no admin user yet: create one with '$VENV_PYTHON manage.py createsuperuser', then open http://$HOST:$PORT/admin/"
fi
log "serving on http://$HOST:$PORT/ (uvicorn; Ctrl-C to stop); the runtime is at http://$HOST:$PORT/api/copilotkit"
# exec: uvicorn receives the signals sent to this script (Ctrl-C, SIGTERM from a supervisor).
exec "$VENV_DIR/bin/uvicorn" copilot_runtime.site.asgi:application --host "$HOST" --port "$PORT" \
    --loop uvloop --http httptools --ws websockets --no-access-log --log-level warning

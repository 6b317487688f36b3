# Shared helpers for scripts/run.sh, scripts/test.sh and scripts/worker.sh.
# Source it; it defines functions and a few variables and runs nothing by itself.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${VENV_DIR:-$REPO_ROOT/.venv}"
VENV_PYTHON="$VENV_DIR/bin/python"

log() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'ERROR: %s\n' "$*" >&2
    exit 1
}

# --- phase timing -----------------------------------------------------------------------------
# phase_begin NAME / phase_end: prints how long each step took; phase_summary prints them all.
PHASE_NAMES=()
PHASE_SECONDS=()
_phase_name=""
_phase_started=0

now_ms() { date +%s%3N; }

phase_begin() {
    _phase_name="$1"
    _phase_started="$(now_ms)"
    log "[$_phase_name] ..."
}

phase_end() {
    [ -n "$_phase_name" ] || return 0
    local elapsed_ms=$(($(now_ms) - _phase_started))
    local seconds
    seconds="$(printf '%d.%01d' $((elapsed_ms / 1000)) $((elapsed_ms % 1000 / 100)))"
    PHASE_NAMES+=("$_phase_name")
    PHASE_SECONDS+=("$seconds")
    log "[$_phase_name] done in ${seconds}s"
    _phase_name=""
}

phase_summary() {
    [ "${#PHASE_NAMES[@]}" -gt 0 ] || return 0
    printf '\n==> timings\n' >&2
    local i
    for i in "${!PHASE_NAMES[@]}"; do
        printf '    %-28s %8ss\n' "${PHASE_NAMES[$i]}" "${PHASE_SECONDS[$i]}" >&2
    done
}

# --- virtualenv -------------------------------------------------------------------------------

# The interpreter the project is pinned to (pyproject: >=3.11,<3.12). PYTHON overrides.
find_python311() {
    local candidate
    for candidate in "${PYTHON:-}" python3.11 python3; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

# ensure_venv runtime|test
# Creates .venv when missing and (re)installs the project when pyproject.toml is newer than the
# stamp of that install. The test install is a superset of the runtime one, so a fresh test stamp
# also satisfies `runtime`.
LOCK_FILE="$REPO_ROOT/requirements.lock"

ensure_venv() {
    local flavour="$1"
    local spec="."
    [ "$flavour" = "test" ] && spec=".[test]"
    local stamp="$VENV_DIR/.installed-$flavour"
    local test_stamp="$VENV_DIR/.installed-test"
    local pyproject="$REPO_ROOT/pyproject.toml"

    if [ ! -x "$VENV_PYTHON" ]; then
        local python
        python="$(find_python311)" ||
            die "Python 3.11 not found (tried \$PYTHON, python3.11, python3). Install it or set PYTHON=/path/to/python3.11."
        log "creating $VENV_DIR with $python"
        if ! "$python" -m venv "$VENV_DIR"; then
            rm -rf "$VENV_DIR"
            die "'$python -m venv' failed. On Debian/Ubuntu install the venv module: apt-get install -y python3.11-venv"
        fi
        rm -f "$VENV_DIR"/.installed-*
    fi

    if [ -f "$stamp" ] && [ ! "$pyproject" -nt "$stamp" ] && [ ! "$LOCK_FILE" -nt "$stamp" ]; then
        log "$VENV_DIR is up to date for '$spec'"
        return 0
    fi
    if [ "$flavour" = "runtime" ] && [ -f "$test_stamp" ] && [ ! "$pyproject" -nt "$test_stamp" ] &&
        [ ! "$LOCK_FILE" -nt "$test_stamp" ]; then
        log "$VENV_DIR is up to date (test install covers the runtime)"
        return 0
    fi

    pip_install_locked "$spec"
    touch "$stamp"
}

# pip_install_locked SPEC: the project with SPEC's extras, at the versions requirements.lock
# pins (the pyproject ranges stay for host projects). Shows each package as it is fetched, so
# the minute a fresh machine takes is not silent.
pip_install_locked() {
    local spec="$1"
    log "installing '$spec' at the versions of requirements.lock (about a minute on a fresh machine)"
    (cd "$REPO_ROOT" && "$VENV_PYTHON" -m pip install --disable-pip-version-check \
        -c "$LOCK_FILE" -e "$spec" 2>&1 |
        while IFS= read -r line; do
            case "$line" in
            Collecting*) line="${line#Collecting }" && printf '  %s\n' "${line%% (from*}" ;;
            Successfully\ installed*) printf '  %s\n' "$line" ;;
            ERROR*|error*) printf '%s\n' "$line" >&2 ;;
            esac
        done
        exit "${PIPESTATUS[0]}") ||
        die "pip install -e '$spec' failed (run it by hand to see why: $VENV_PYTHON -m pip install -c requirements.lock -e '$spec')"
}

require_venv() {
    [ -x "$VENV_PYTHON" ] ||
        die "$VENV_PYTHON is missing or not executable and SKIP_INSTALL is set: run 'make run' (or unset SKIP_INSTALL) first."
}

# --- misc -------------------------------------------------------------------------------------

# Prints a TCP port that is free on 127.0.0.1 right now.
free_port() {
    local python="${VENV_PYTHON}"
    [ -x "$python" ] || python="$(command -v python3)"
    "$python" -c 'import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])'
}

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

# Every Python the package declares (pyproject: requires-python >=3.11,<3.15).
PYTHON_MIN_MINOR=11
PYTHON_MAX_MINOR=14

# python_minor PATH: prints the interpreter's 3.x minor version, or fails.
python_minor() {
    "$1" -c 'import sys; assert sys.version_info[0] == 3; print(sys.version_info[1])' 2>/dev/null
}

# find_python: $PYTHON (refused outside the declared range), else python3, else the newest
# python3.N on PATH, within the declared range.
find_python() {
    local candidate minor
    if [ -n "${PYTHON:-}" ]; then
        minor="$(python_minor "$PYTHON")" || die "PYTHON=$PYTHON does not run"
        [ "$minor" -ge "$PYTHON_MIN_MINOR" ] && [ "$minor" -le "$PYTHON_MAX_MINOR" ] ||
            die "PYTHON=$PYTHON is Python 3.$minor; the package needs 3.$PYTHON_MIN_MINOR to 3.$PYTHON_MAX_MINOR"
        command -v "$PYTHON"
        return 0
    fi
    for candidate in python3 python3.14 python3.13 python3.12 python3.11; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        minor="$(python_minor "$candidate")" || continue
        if [ "$minor" -ge "$PYTHON_MIN_MINOR" ] && [ "$minor" -le "$PYTHON_MAX_MINOR" ]; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

# find_newest_python MIN_MINOR: the newest declared Python of at least 3.MIN_MINOR on PATH or
# under pyenv ($PYENV_ROOT/versions), for the newest lock (Django 6 needs Python 3.12).
find_newest_python() {
    local floor="$1" best="" best_minor=0 candidate minor
    local candidates=(python3.14 python3.13 python3.12 python3)
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    candidates+=("$pyenv_root"/versions/3.*/bin/python)
    for candidate in "${candidates[@]}"; do
        command -v "$candidate" >/dev/null 2>&1 || [ -x "$candidate" ] || continue
        minor="$(python_minor "$candidate")" || continue
        [ "$minor" -ge "$floor" ] && [ "$minor" -le "$PYTHON_MAX_MINOR" ] || continue
        if [ "$minor" -gt "$best_minor" ]; then
            best="$(command -v "$candidate" || echo "$candidate")"
            best_minor="$minor"
        fi
    done
    [ -n "$best" ] && echo "$best"
}

# ensure_venv runtime|test
# Creates .venv when missing and (re)installs the project when pyproject.toml is newer than the
# stamp of that install. `test` is everything make test needs in one pip run: the `test` extra,
# the agent tests' real peers (`test-agents`: the copilotkit SDK, ag-ui-langgraph,
# langchain-openai, uvicorn), the OTLP exporter and the LangGraph and LangChain adapters. It is
# a superset of the runtime install, so a fresh test stamp also satisfies `runtime`.
LOCK_FILE="$REPO_ROOT/requirements.lock"
TEST_SPEC=".[test,test-agents,otel,langgraph,langchain]"

ensure_venv() {
    local flavour="$1"
    local spec="."
    [ "$flavour" = "test" ] && spec="$TEST_SPEC"
    local stamp="$VENV_DIR/.installed-$flavour"
    local test_stamp="$VENV_DIR/.installed-test"
    local pyproject="$REPO_ROOT/pyproject.toml"

    if [ ! -x "$VENV_PYTHON" ]; then
        local python
        python="$(find_python)" ||
            die "no Python 3.11 to 3.14 found (tried \$PYTHON, python3, python3.14 ... python3.11). Install one or set PYTHON=/path/to/python3."
        create_venv "$python" "$VENV_DIR"
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

# create_venv PYTHON DIR
create_venv() {
    log "creating $2 with $1 ($("$1" --version 2>&1))"
    if ! "$1" -m venv "$2"; then
        rm -rf "$2"
        die "'$1 -m venv' failed. On Debian/Ubuntu install the venv module: apt-get install -y python3-venv"
    fi
    rm -f "$2"/.installed-*
}

# pip_install_locked SPEC: the project with SPEC's extras, at the versions requirements.lock
# pins (the pyproject ranges stay for host projects). Shows each package as it is fetched, so
# the minute a fresh machine takes is not silent. --no-compile: pip would byte-compile every
# module of every package (a third of the install's time); Python compiles the ones a process
# imports, once, when it first imports them.
pip_install_locked() {
    local spec="$1"
    log "installing '$spec' at the versions of $(basename "$LOCK_FILE") (about a minute on a fresh machine)"
    (cd "$REPO_ROOT" && "$VENV_PYTHON" -m pip install --disable-pip-version-check --no-compile \
        -c "$LOCK_FILE" -e "$spec" 2>&1 |
        while IFS= read -r line; do
            case "$line" in
            Collecting*) line="${line#Collecting }" && printf '  %s\n' "${line%% (from*}" ;;
            Successfully\ installed*) printf '  %s\n' "$line" ;;
            ERROR*|error*) printf '%s\n' "$line" >&2 ;;
            esac
        done
        exit "${PIPESTATUS[0]}") ||
        die "pip install -e '$spec' failed (run it by hand to see why: $VENV_PYTHON -m pip install -c $LOCK_FILE -e '$spec')"
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

#!/usr/bin/env bash
# `make test`: the whole suite from a fresh clone.
#
#   1. installs missing system packages (PostgreSQL, Redis) when running as root on Debian;
#   2. side by side: creates/refreshes .venv with the test extras (`test`, `test-agents`: the
#      agent peers, `otel`: the OTLP exporter, the LangGraph and LangChain adapters), the
#      newest releases' venv when step 6 will run, and the Node e2e clients
#      (tests/e2e/js/install.sh);
#   3. lints (ruff check), failing fast;
#   4. starts a throwaway PostgreSQL, and a throwaway Redis per pytest worker, on free loopback
#      ports;
#   5. with no arguments, runs the suite: everything not marked `serial` on TEST_WORKERS
#      pytest-xdist workers (each with its own test database, Redis server and ports:
#      tests/support/workers.py), niced, and beside them the tests marked `serial` (load and
#      fault tests, which must not wait for a core) one at a time in a lane of their own at
#      normal priority (run_suite);
#   6. with no arguments, runs the host, Celery, broker and channel-layer tests again (the same
#      two steps) in a second venv (.venv-newest) holding requirements-newest.lock's releases
#      on the newest Python 3.12-3.14 found (PATH, then pyenv): the newest Django, Celery,
#      kombu, channels_redis and redis-py the ranges admit.
# With arguments, it runs exactly `pytest ARGS` instead of 5 and 6, in one process unless ARGS
# say `-n N`: `make test ARGS="-k foo -x"`, `make test ARGS="-n 6 tests/e2e"`.
# Every test has a time limit (pytest-timeout; pyproject.toml's `timeout`, and
# @pytest.mark.timeout on the few that need longer): a hung test fails with a traceback.
# Everything it started is stopped on exit, on failure and on Ctrl-C; the exit code is the first
# failing pytest run's (exit code 5, "no tests collected", stays a failure).
#
# The edit loop: `QUICK=1 make test` (or `QUICK=1 make test ARGS="-k foo"`) runs, on the
# workers, only the tests not marked e2e, faults or serial, and not the newest releases' run.
# docs/testing.md has the rest.
#
# The suite sees DATABASE_URL (the throwaway PostgreSQL; pytest-django creates its test database
# there, one per worker) and TEST_REDIS_URL (NOT REDIS_URL: each test decides whether it uses
# Redis; TEST_REDIS_URLS lists the workers' servers, and each worker sees its own as
# TEST_REDIS_URL).
#
# Environment:
#   TEST_WORKERS=N   pytest-xdist workers for steps 5 and 6 (default 6; 0: one process)
#   QUICK=1          the edit loop's subset (above), on the workers; ARGS are added to it
#   SKIP_INSTALL=1   use .venv as is (no pip install); system packages are still checked
#   SKIP_LINT=1      skip `ruff check` (local iteration only; CI always lints)
#   SKIP_NEWEST=1    skip step 6 (local iteration only; CI always runs it)
#   NEWEST=1         run step 6 even with arguments, passing them to it instead of the subset
#   NEWEST_VENV_DIR  the second venv (default .venv-newest)
#   PG_BIN=/path     directory holding initdb/pg_ctl/psql (default: newest /usr/lib/postgresql/*/bin)
#   SCREENSHOT_DIR=/path  where browser tests save screenshots (default: artifacts/screenshots)
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

RUN_AS_ROOT=0
[ "$(id -u)" -eq 0 ] && RUN_AS_ROOT=1

WORK_DIR=""        # our scratch directory (logs, redis)
PG_DIR=""          # PostgreSQL data + socket directory (owned by `postgres` when we are root)
PG_STARTED=0
REDIS_PIDS=()       # one redis-server per pytest worker
LANE_PID=""         # the serial lane's pytest while it runs (run_suite)
POLICY_RC_CREATED=0
POLICY_RC=/usr/sbin/policy-rc.d

# --- cleanup ----------------------------------------------------------------------------------

stop_postgres() {
    [ "$PG_STARTED" -eq 1 ] || return 0
    PG_STARTED=0
    as_postgres "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w -t 15 stop >/dev/null 2>&1 || true
    # Belt and braces: if pg_ctl could not stop it, kill the postmaster by its pid file.
    local pid_file="$PG_DIR/data/postmaster.pid"
    if [ -f "$pid_file" ]; then
        local pid
        pid="$(head -n 1 "$pid_file")"
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
}

stop_redis() {
    [ "${#REDIS_PIDS[@]}" -gt 0 ] || return 0
    local pid waited
    for pid in "${REDIS_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${REDIS_PIDS[@]}"; do
        waited=0
        while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 50 ]; do
            sleep 0.1
            waited=$((waited + 1))
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    REDIS_PIDS=()
}

remove_policy_rc() {
    if [ "$POLICY_RC_CREATED" -eq 1 ]; then
        rm -f "$POLICY_RC"
        POLICY_RC_CREATED=0
    fi
}

cleanup() {
    local status=$?
    set +e
    if [ -n "$LANE_PID" ] && kill -0 "$LANE_PID" 2>/dev/null; then
        kill -TERM "$LANE_PID" 2>/dev/null
        wait "$LANE_PID" 2>/dev/null
    fi
    phase_end
    if [ "$PG_STARTED" -eq 1 ] || [ "${#REDIS_PIDS[@]}" -gt 0 ]; then
        phase_begin "stop services"
        stop_redis
        stop_postgres
        phase_end
    fi
    remove_policy_rc
    [ -n "$PG_DIR" ] && rm -rf "$PG_DIR"
    [ -n "$WORK_DIR" ] && rm -rf "$WORK_DIR"
    phase_summary
    if [ "$status" -eq 0 ]; then
        log "tests: PASSED"
    else
        log "tests: FAILED (exit code $status)"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- system packages --------------------------------------------------------------------------

find_pg_bin() {
    if [ -n "${PG_BIN:-}" ]; then
        [ -x "$PG_BIN/initdb" ] && echo "$PG_BIN" && return 0
        return 1
    fi
    local newest
    # Debian installs each major version side by side; take the newest.
    newest="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    if [ -n "$newest" ] && [ -x "$newest/initdb" ]; then
        echo "$newest"
        return 0
    fi
    if command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

ensure_system_packages() {
    local missing=()
    find_pg_bin >/dev/null || missing+=(postgresql)
    command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
    # The real CopilotKit clients (tests/e2e/js) need Node >= 18; Debian 12's nodejs is 18.
    if [ -f tests/e2e/js/install.sh ]; then
        command -v node >/dev/null 2>&1 || missing+=(nodejs)
        command -v npm >/dev/null 2>&1 || missing+=(npm)
    fi
    # Browser e2e tests drive Debian's Chromium headless through playwright-core (npm); no
    # browser is ever downloaded.
    [ -x /usr/bin/chromium ] || missing+=(chromium)
    # docs/production.md's nginx site is served in front of uvicorn (tests/e2e/test_nginx.py),
    # by Debian's nginx (/usr/sbin, not on every user's PATH); curl reads its HTTP/2 stream.
    [ -x /usr/sbin/nginx ] || missing+=(nginx)
    command -v curl >/dev/null 2>&1 || missing+=(curl)

    if [ "${#missing[@]}" -eq 0 ]; then
        log "system packages present (PostgreSQL: $(find_pg_bin), redis-server: $(command -v redis-server))"
        return 0
    fi
    if [ "$RUN_AS_ROOT" -ne 1 ]; then
        die "missing system packages: ${missing[*]}. Not root, so not installing them: run 'sudo apt-get install -y ${missing[*]}' (or run make test as root)."
    fi
    command -v apt-get >/dev/null 2>&1 ||
        die "missing system packages (${missing[*]}) and no apt-get to install them with."

    # Packages must not start their own system-wide services (a cluster on :5432, redis on
    # :6379): the suite runs throwaway instances instead. policy-rc.d is Debian's switch for that.
    if [ ! -e "$POLICY_RC" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$POLICY_RC"
        chmod +x "$POLICY_RC"
        POLICY_RC_CREATED=1
    fi
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get install ${missing[*]} failed"
    remove_policy_rc
}

# --- PostgreSQL -------------------------------------------------------------------------------

PG_USER=copilot
PG_PASSWORD=copilot
PG_DATABASE=copilot

# PostgreSQL refuses to run as root: as root, run its tools as the `postgres` system user.
as_postgres() {
    if [ "$RUN_AS_ROOT" -eq 1 ]; then
        (cd "$PG_DIR" && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

start_postgres() {
    PG_BIN="$(find_pg_bin)" || die "PostgreSQL binaries (initdb) not found; set PG_BIN=/usr/lib/postgresql/<version>/bin"
    PG_DIR="$(mktemp -d /tmp/copilot-test-pg.XXXXXX)"
    chmod 755 "$PG_DIR"
    if [ "$RUN_AS_ROOT" -eq 1 ]; then
        id postgres >/dev/null 2>&1 ||
            die "running as root but there is no 'postgres' system user to run PostgreSQL as"
        chown postgres: "$PG_DIR"
    fi

    if ! as_postgres "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -E UTF8 --no-locale \
        --auth-local=trust --auth-host=scram-sha-256 >"$WORK_DIR/initdb.log" 2>&1; then
        cat "$WORK_DIR/initdb.log" >&2
        die "initdb failed"
    fi

    PG_PORT="$(free_port)"
    # Throwaway data: durability off for speed; enough connections for every worker's subprocesses.
    as_postgres tee -a "$PG_DIR/data/postgresql.conf" >/dev/null <<EOF

# --- scripts/test.sh ---
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_DIR'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 400
EOF

    if ! as_postgres "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 30 \
        start >/dev/null; then
        cat "$PG_DIR/postgres.log" >&2 2>/dev/null
        die "PostgreSQL did not start (log above)"
    fi
    PG_STARTED=1

    local deadline=$((SECONDS + 30))
    until "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            cat "$PG_DIR/postgres.log" >&2 2>/dev/null
            die "PostgreSQL is not accepting connections on 127.0.0.1:$PG_PORT after 30s (log above)"
        fi
        sleep 0.2
    done

    # CREATEDB: pytest-django creates (and drops) its test_<name> database.
    "$PG_BIN/psql" -q -v ON_ERROR_STOP=1 -h "$PG_DIR" -p "$PG_PORT" -U postgres -d postgres \
        -c "CREATE ROLE $PG_USER LOGIN CREATEDB PASSWORD '$PG_PASSWORD'" \
        -c "CREATE DATABASE $PG_DATABASE OWNER $PG_USER" >/dev/null ||
        die "could not create the PostgreSQL role/database"

    export DATABASE_URL="postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DATABASE"
    log "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT"
}

# --- Redis ------------------------------------------------------------------------------------

redis_answers() {
    if command -v redis-cli >/dev/null 2>&1; then
        [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = "PONG" ]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

# start_redis INDEX: one redis-server on a free loopback port, its URL added to REDIS_URLS.
start_redis() {
    local index="$1" port pid log
    port="$(free_port)"
    log="$WORK_DIR/redis-$index.log"
    mkdir -p "$WORK_DIR/redis-$index"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
        --dir "$WORK_DIR/redis-$index" >"$log" 2>&1 &
    pid=$!
    REDIS_PIDS+=("$pid")

    local deadline=$((SECONDS + 15))
    until redis_answers "$port"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$log" >&2
            die "redis-server exited at start (log above)"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            cat "$log" >&2
            die "redis-server is not answering on 127.0.0.1:$port after 15s (log above)"
        fi
        sleep 0.1
    done
    REDIS_URLS+=("redis://127.0.0.1:$port/0")
}

# One Redis server per pytest worker (tests/support/workers.py): pub/sub and FLUSHALL are
# server-wide, so workers sharing one would see each other's channels and data.
start_redis_servers() {
    local count="$1" index
    REDIS_URLS=()
    for ((index = 0; index < count; index++)); do
        start_redis "$index"
    done
    export TEST_REDIS_URL="${REDIS_URLS[0]}"
    export TEST_REDIS_URLS="${REDIS_URLS[*]}"
    log "Redis on ${REDIS_URLS[*]}"
}

# --- the newest releases -----------------------------------------------------------------------

NEWEST_VENV_DIR="${NEWEST_VENV_DIR:-$REPO_ROOT/.venv-newest}"
NEWEST_LOCK="$REPO_ROOT/requirements-newest.lock"
# The tests of what a host's own versions change: the worker's transport and strategy, the
# channel layer, the host project and its entry, the Celery executor end to end.
NEWEST_TESTS=(
    tests/copilot_runtime/fastlane
    tests/copilot_runtime/runs/test_layer_publish.py
    tests/copilot_runtime/runs/test_layer_groups.py
    tests/copilot_runtime/runs/test_claim_redis.py
    tests/copilot_runtime/runs/test_claim_while_streaming.py
    tests/copilot_runtime/runs/test_publish.py
    tests/copilot_runtime/runs/test_replies.py
    tests/copilot_runtime/runs/test_stops.py
    tests/copilot_runtime/site/test_settings.py
    tests/copilot_runtime/test_checks.py
    tests/copilot_runtime/runs/test_worker_recovery.py
    tests/copilot_runtime/test_tasks.py
    tests/test_layers.py
    tests/e2e/celery
    tests/e2e/test_agents_celery.py
    tests/e2e/test_host_project.py
    tests/e2e/test_host_entry.py
    tests/faults/test_broker_faults.py
)

ensure_newest_venv() {
    local stamp="$NEWEST_VENV_DIR/.installed-newest"
    if [ ! -x "$NEWEST_VENV_DIR/bin/python" ]; then
        local python
        python="$(find_newest_python 12)" ||
            die "no Python 3.12 to 3.14 found for requirements-newest.lock (Django 6 needs 3.12): install one (pyenv install 3.13) or set SKIP_NEWEST=1."
        create_venv "$python" "$NEWEST_VENV_DIR"
    fi
    if [ -f "$stamp" ] && [ ! "$REPO_ROOT/pyproject.toml" -nt "$stamp" ] && [ ! "$NEWEST_LOCK" -nt "$stamp" ]; then
        log "$NEWEST_VENV_DIR is up to date"
        return 0
    fi
    VENV_PYTHON="$NEWEST_VENV_DIR/bin/python" LOCK_FILE="$NEWEST_LOCK" \
        pip_install_locked "$TEST_SPEC"
    touch "$stamp"
}

# --- what runs where ----------------------------------------------------------------------------

# pytest-xdist workers for the parallel runs (tests/support/workers.py: a test database, a Redis
# server and a block of ports each). Many tests wait on served processes rather than compute,
# so more workers than cores pays; TEST_WORKERS=0 runs everything in one process.
DEFAULT_WORKERS=6
WORKERS="${TEST_WORKERS:-$DEFAULT_WORKERS}"
[[ "$WORKERS" =~ ^[0-9]+$ ]] || die "TEST_WORKERS must be a whole number (0: no workers), not '$WORKERS'"
# Where the tests marked `serial` live: the serial lane collects only these (collecting the
# whole suite to pick a handful costs it seconds of CPU). tests/test_suite_workers.py checks that
# no test marked serial lives anywhere else.
SERIAL_PATHS=(tests/e2e/test_load.py tests/e2e/celery/test_celery_threads_pool.py tests/faults)
# QUICK=1: the edit loop's subset, nothing served (e2e), no fault tests, nothing marked serial.
QUICK_MARKERS="not e2e and not faults and not serial"

# --- main -------------------------------------------------------------------------------------

WORK_DIR="$(mktemp -d /tmp/copilot-test.XXXXXX)"

phase_begin "system packages"
ensure_system_packages
phase_end

# Step 6 runs with no arguments (or NEWEST=1), never for QUICK or SKIP_NEWEST.
RUN_NEWEST=0
if [ -z "${SKIP_NEWEST:-}" ] && [ -z "${QUICK:-}" ] && { [ "$#" -eq 0 ] || [ -n "${NEWEST:-}" ]; }; then
    RUN_NEWEST=1
fi

# The three installs (the test venv, the newest releases' venv, the Node clients) go side by
# side: each waits on downloads and disks as much as on a core, so together they take about as
# long as the longest. The background ones print their output when they are done.
phase_begin "installs"
background_pids=()
background_logs=()
background_names=()
install_in_background() {
    local name="$1" log_file="$WORK_DIR/install-${#background_pids[@]}.log"
    shift
    ("$@") >"$log_file" 2>&1 &
    background_pids+=("$!")
    background_logs+=("$log_file")
    background_names+=("$name")
}
if [ -f tests/e2e/js/install.sh ]; then
    install_in_background "the Node e2e clients (tests/e2e/js/install.sh)" bash tests/e2e/js/install.sh
fi
if [ -n "${SKIP_INSTALL:-}" ]; then
    require_venv
else
    if [ "$RUN_NEWEST" -eq 1 ]; then
        install_in_background "the newest releases' venv" ensure_newest_venv
    fi
    ensure_venv test
fi
install_failed=""
for index in "${!background_pids[@]}"; do
    if wait "${background_pids[$index]}"; then
        cat "${background_logs[$index]}" >&2
    else
        cat "${background_logs[$index]}" >&2
        install_failed="${install_failed:+$install_failed, }${background_names[$index]}"
    fi
done
[ -z "$install_failed" ] || die "installing $install_failed failed (output above)"
phase_end

if [ -n "${SKIP_LINT:-}" ]; then
    log "SKIP_LINT is set: not running ruff check"
else
    phase_begin "ruff check"
    "$VENV_DIR/bin/ruff" check . ||
        die "ruff check failed: fix the findings above (ruff check --fix . handles many)"
    phase_end
fi

phase_begin "start postgres"
start_postgres
phase_end

phase_begin "start redis"
# One per worker, and one more for the serial lane (run_suite) when there are workers.
start_redis_servers "$((WORKERS > 0 ? WORKERS + 1 : 1))"
phase_end


# The suite decides per test where Redis and the model upstream are used: never inherit the
# caller's REDIS_URL, broker or OpenAI credentials.
unset REDIS_URL CELERY_BROKER_URL OPENAI_API_KEY OPENAI_BASE_URL
# The suite starts hundreds of Python processes (servers, workers, clients): let them keep the
# project's compiled modules (__pycache__, ignored by git) rather than compile them each time.
unset PYTHONDONTWRITEBYTECODE
# Browser tests save their screenshots here (artifacts/ is ignored by git).
export SCREENSHOT_DIR="${SCREENSHOT_DIR:-$REPO_ROOT/artifacts/screenshots}"

# run_pytest LABEL PYTHON ARGS...: one pytest run as a timed phase; its exit code in
# last_status (exit code 5, "no tests collected", is a failure like any other).
run_pytest() {
    local label="$1" python="$2"
    shift 2
    phase_begin "$label"
    log "pytest $*"
    set +e
    "$python" -m pytest "$@"
    last_status=$?
    set -e
    phase_end
    if [ "$last_status" -eq 5 ]; then
        log "$label: pytest collected no tests (exit code 5): that is a failure"
    fi
}

statuses=()

# record_status LABEL STATUS: adds a run's exit code (5, "no tests collected", is a failure).
record_status() {
    [ "$2" -eq 5 ] && log "$1: pytest collected no tests (exit code 5): that is a failure"
    statuses+=("$2")
}

# run_suite LABEL PYTHON [PATHS...]: the tests not marked `serial` on the workers (in PATHS, or
# the whole suite), and beside them the `serial` ones (load and fault tests; in PATHS, or in
# SERIAL_PATHS) in a lane of their own: one process, as worker number WORKERS
# (tests/support/workers.py: a Redis server and ports of its own), at normal priority while the
# parallel run is niced, so the lane's servers get a core whenever they want one. The lane
# mostly waits (on its own PostgreSQL and Redis restarting), so beside the parallel run it costs
# little and saves its whole duration. Its output follows the parallel run's. Without workers
# (TEST_WORKERS=0) the two run one after the other.
run_suite() {
    local label="$1" python="$2"
    shift 2
    local lane_paths=("$@")
    [ "$#" -eq 0 ] && lane_paths=("${SERIAL_PATHS[@]}")
    if [ "$WORKERS" -eq 0 ]; then
        run_pytest "$label, not serial" "$python" -m "not serial" "$@"
        statuses+=("$last_status")
        run_pytest "$label, serial" "$python" -m serial "$@"
        statuses+=("$last_status")
        return
    fi
    phase_begin "$label"
    local lane_log="$WORK_DIR/serial-lane.log" parallel_status lane_status
    log "pytest -m serial ${lane_paths[*]} (the serial lane, beside the parallel run; its output follows it)"
    TEST_WORKER_INDEX="$WORKERS" "$python" -m pytest -m serial -p no:cacheprovider \
        --basetemp "$WORK_DIR/serial-lane" "${lane_paths[@]}" >"$lane_log" 2>&1 &
    LANE_PID=$!
    log "nice -n 10 pytest ${parallel_args[*]} -m 'not serial' $*"
    set +e
    nice -n 10 "$python" -m pytest "${parallel_args[@]}" -m "not serial" "$@"
    parallel_status=$?
    wait "$LANE_PID"
    lane_status=$?
    set -e
    LANE_PID=""
    log "the serial lane (exit code $lane_status):"
    cat "$lane_log"
    phase_end
    record_status "$label (parallel)" "$parallel_status"
    record_status "$label (serial lane)" "$lane_status"
}

# pytest-xdist's workers, each handed the next module when it is free (--dist loadfile: a
# module's fixtures are set up once), the longest first (tests/conftest.py orders them).
parallel_args=()
[ "$WORKERS" -gt 0 ] && parallel_args=(-n "$WORKERS" --dist loadfile)

if [ -n "${QUICK:-}" ]; then
    # The edit loop: everything in-process, in parallel; nothing served, no faults, no newest.
    run_pytest "pytest (quick)" "$VENV_PYTHON" "${parallel_args[@]}" -m "$QUICK_MARKERS" "$@"
    statuses+=("$last_status")
elif [ "$#" -gt 0 ]; then
    # Arguments: exactly those (add -n N to them for workers).
    run_pytest "pytest" "$VENV_PYTHON" "$@"
    statuses+=("$last_status")
else
    run_suite "pytest" "$VENV_PYTHON"
fi

if [ "$RUN_NEWEST" -eq 1 ]; then
    if [ -n "${SKIP_INSTALL:-}" ] && [ ! -x "$NEWEST_VENV_DIR/bin/python" ]; then
        phase_begin "newest venv"
        ensure_newest_venv
        phase_end
    fi
    log "$("$NEWEST_VENV_DIR/bin/python" --version) with requirements-newest.lock"
    if [ "$#" -gt 0 ]; then
        run_pytest "pytest (newest)" "$NEWEST_VENV_DIR/bin/python" "$@"
        statuses+=("$last_status")
    else
        run_suite "pytest (newest)" "$NEWEST_VENV_DIR/bin/python" "${NEWEST_TESTS[@]}"
    fi
fi

for status in "${statuses[@]}"; do
    [ "$status" -ne 0 ] && exit "$status"
done
exit 0

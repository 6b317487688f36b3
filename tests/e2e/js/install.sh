#!/usr/bin/env bash
# Installs the pinned CopilotKit GraphQL clients (gql-<version>/), the GraphQL-over-websocket
# clients (ws/), the CopilotKit v2 frontend core with Playwright's library (agui/), the AG-UI 1.0
# client (agui-1.0/), Playwright's library alone for the admin's browser tests (browser/), and
# the real CopilotKit React UIs (react-v1/, react-v2/, bundled by the cross-origin browser test)
# used by the end-to-end tests, and the TypeScript runtimes (benchmarks/peers/v1, v2).
# Runs `npm ci` in a version folder only when its node_modules is missing or older than its
# lock file, so calling it before every test session is cheap. Quiet unless something fails.
set -euo pipefail

js_root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# The folders install side by side (npm's cache is safe to share between concurrent runs): a
# fresh machine waits for the slowest folder rather than the sum of them.
pids=()
logs=()
folders=()
# The benchmark's TypeScript runtimes too: the parity tests (tests/e2e/test_ts_parity.py)
# compare what the real v2 client sees from the v2 one with what it sees from this runtime, and
# tests/benchmarks/test_side_by_side.py serves both (installed here, beside the rest, rather
# than inside a test).
peers="$(cd "${js_root}/../../../benchmarks/peers" && pwd)"
ts_v1="${peers}/v1"
ts_v2="${peers}/v2"
for folder in "${js_root}"/gql-*/ "${js_root}"/ws/ "${js_root}"/agui/ "${js_root}"/agui-1.0/ \
  "${js_root}"/browser/ "${js_root}"/react-v1/ "${js_root}"/react-v2/ "${ts_v1}"/ "${ts_v2}"/; do
  folder="${folder%/}"
  lock_file="${folder}/package-lock.json"
  [[ -f "${lock_file}" ]] || continue
  # npm ci writes node_modules/.package-lock.json last, so it marks a finished install.
  install_marker="${folder}/node_modules/.package-lock.json"
  if [[ -f "${install_marker}" && ! "${lock_file}" -nt "${install_marker}" ]]; then
    continue
  fi
  log_file="$(mktemp)"
  flags=(--no-audit --no-fund --loglevel=error)
  if [[ "${folder}" == "${ts_v1}" || "${folder}" == "${ts_v2}" ]]; then
    # As benchmarks/peers installs it: the runtime declares optional peers (LangChain,
    # Anthropic...) that its server never loads.
    flags+=(--ignore-scripts --legacy-peer-deps)
  fi
  (cd "${folder}" && npm ci "${flags[@]}" >"${log_file}" 2>&1) &
  pids+=("$!")
  logs+=("${log_file}")
  folders+=("${folder}")
done

failed=0
for index in "${!pids[@]}"; do
  if ! wait "${pids[${index}]}"; then
    echo "npm ci failed in ${folders[${index}]}:" >&2
    cat "${logs[${index}]}" >&2
    failed=1
  fi
  rm -f "${logs[${index}]}"
done
exit "${failed}"

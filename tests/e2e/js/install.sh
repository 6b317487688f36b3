#!/usr/bin/env bash
# Installs the pinned CopilotKit GraphQL clients (gql-<version>/), the GraphQL-over-websocket
# clients (ws/), the CopilotKit v2 frontend core with Playwright's library (agui/), the AG-UI 1.0
# client (agui-1.0/), Playwright's library alone for the admin's browser tests (browser/), and
# the real CopilotKit React UIs (react-v1/, react-v2/, bundled by the cross-origin browser test)
# used by the end-to-end tests.
# Runs `npm ci` in a version folder only when its node_modules is missing or older than its
# lock file, so calling it before every test session is cheap. Quiet unless something fails.
set -euo pipefail

js_root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# The folders install side by side (npm's cache is safe to share between concurrent runs): a
# fresh machine waits for the slowest folder rather than the sum of them.
pids=()
logs=()
folders=()
for folder in "${js_root}"/gql-*/ "${js_root}"/ws/ "${js_root}"/agui/ "${js_root}"/agui-1.0/ \
  "${js_root}"/browser/ "${js_root}"/react-v1/ "${js_root}"/react-v2/; do
  folder="${folder%/}"
  lock_file="${folder}/package-lock.json"
  [[ -f "${lock_file}" ]] || continue
  # npm ci writes node_modules/.package-lock.json last, so it marks a finished install.
  install_marker="${folder}/node_modules/.package-lock.json"
  if [[ -f "${install_marker}" && ! "${lock_file}" -nt "${install_marker}" ]]; then
    continue
  fi
  log_file="$(mktemp)"
  (cd "${folder}" && npm ci --no-audit --no-fund --loglevel=error >"${log_file}" 2>&1) &
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

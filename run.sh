#!/usr/bin/env bash
# poolgrad's two entry points (see README):
#   ./run.sh conformance   set up, then run the conformance suite and write its report
#   ./run.sh test          set up, then run the project's own tests (conformance included)
# Both are idempotent: set-up is skipped when nothing it depends on changed.
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
venv="$here/.venv"
out="$here/out"
mode="${1:-}"
shift || true

setup() {
    local stamp="$venv/.poolgrad-setup"
    local want
    want=$(cat pyproject.toml constraints/cpu.txt constraints/plugins.txt plugins/*/pyproject.toml | sha256sum | cut -d' ' -f1)
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
    fi
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
        # constraints/cpu.txt pins this machine's CPU stack (torch 2.13.0 CPU wheel, TF 2.21 CPU, JAX 0.10).
        "$venv/bin/python" -m pip install -q -c constraints/cpu.txt -e ".[all,dev]"
        # The frameworks that come as plugins (plugins/, README "Adding a framework"), pinned in
        # constraints/plugins.txt and installed without resolving their own requirements (see there).
        "$venv/bin/python" -m pip install -q --no-deps -c constraints/cpu.txt -r constraints/plugins.txt
        local p
        for p in plugins/*/; do
            "$venv/bin/python" -m pip install -q --no-deps -e "$p"
        done
        echo "$want" >"$stamp"
    fi
    if ! command -v clang >/dev/null 2>&1; then
        # tinygrad's CPU device compiles its kernels with clang.
        if [ "$(id -u)" = 0 ]; then
            (apt-get update -qq && apt-get install -y -qq clang >/dev/null) || echo "warning: could not install clang; tinygrad targets will fail" >&2
        else
            echo "warning: clang missing and not root; tinygrad targets will fail" >&2
        fi
    fi
    if [ "$mode" = test ] && ! command -v chromium >/dev/null 2>&1; then
        # The report's browser test drives Debian's Chromium headless.
        if [ "$(id -u)" = 0 ]; then
            (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "warning: could not install chromium; browser tests will skip" >&2
        else
            echo "warning: chromium missing and not root; browser tests will skip" >&2
        fi
    fi
    mkdir -p "$out"
}

case "$mode" in
    conformance)
        setup
        set +e
        "$venv/bin/python" -m pytest poolgrad/conformance -n 2 \
            --results "$out/results.jsonl.gz" --report-html "$out/report.html" "$@"
        rc=$?
        set -e
        echo "results: $out/results.jsonl.gz"
        echo "report:  $out/report.html"
        exit $rc
        ;;
    test)
        setup
        set +e
        # The project's tests (the plugins' included) plus the whole CPU catalogue of every
        # framework on every variant, torch.compile included (see README, "Running a subset",
        # for what that costs).
        "$venv/bin/python" -m pytest -n 2 --junitxml "$out/tests.xml" \
            --results "$out/test-results.jsonl.gz" "$@"
        rc=$?
        set -e
        echo "test log (JUnit XML): $out/tests.xml"
        echo "conformance results:  $out/test-results.jsonl.gz"
        exit $rc
        ;;
    *)
        echo "usage: ./run.sh conformance|test [pytest args...]" >&2
        exit 2
        ;;
esac

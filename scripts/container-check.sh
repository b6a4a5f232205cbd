#!/usr/bin/env bash
# Build the CPU image (Dockerfile) with podman and prove it: it builds; it runs as non-root;
# its HEALTHCHECK reports healthy; the playground and every route in the server's own
# /openapi.json answer from the container; SIGTERM (`podman stop -t 30`) lets an in-flight
# stream end with its normal final event and the container exits 0. Prints the image size and
# a PASS/FAIL summary. .ci/run runs it on every landing.
#
#   sudo bash scripts/container-check.sh         # about 25 s with the base image and the
#                                                # dependency layer cached (2-core machine)
#   sudo bash scripts/container-check.sh --cold  # base image rebuilt, no build cache: 2.5 min
#
# Exit status: 0 passed; 1 a check failed; 3 this machine cannot run containers at all (no
# root for the base image, or no container runtime that works here: some sandboxes refuse
# crun's rlimits and cgroups and have no runc), with one line saying why. Then
# tests/test_runtime_install.py, which installs and runs what the Dockerfile does without a
# container, stands in for the image.
#
# Environment: BASE_IMAGE (default: a Debian base built here by scripts/container-base.sh when
# missing; python:3.11-slim works where a registry can be reached), IMAGE (the tag to build),
# KEEP=1 leaves the container behind. Needs root for the base image (debootstrap), podman,
# python3. pip inside the build uses this host's pip settings (`pip config list`): its index
# URLs and CA bundle go in as build secrets, never into the image or this repository.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

COLD=0
[[ ${1:-} == --cold ]] && COLD=1
LOCAL_BASE=localhost/python-debian:bookworm
BASE_IMAGE="${BASE_IMAGE:-$LOCAL_BASE}"
IMAGE="${IMAGE:-localhost/onnx-genai-server:check}"
NAME="genai-check-$$"
work=$(mktemp -d)
log="$work/podman.log"  # podman's own noise (e.g. no systemd for healthcheck timers)
started=$(date +%s)
declare -a summary=()
failed=0

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [[ ${KEEP:-0} != 1 ]]; then
    podman rm -f -t 0 "$NAME" >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT

record() {  # record PASS|FAIL|INFO what detail
  summary+=("$(printf '%-4s  %-24s %s' "$1" "$2" "$3")")
  [[ $1 == FAIL ]] && failed=1
  echo "== $1: $2 ($3)"
}

finish() {
  echo
  echo "== summary ($(($(date +%s) - started)) s in all) =="
  printf '%s\n' "${summary[@]}"
  if ((failed)); then
    echo "RESULT: FAIL"
    exit 1
  fi
  echo "RESULT: PASS"
  exit 0
}

elapsed() { echo "$(($(date +%s) - $1)) s"; }

cannot() {  # this machine cannot run containers: not a failure of the image
  echo "container check: cannot run containers here: $1"
  exit 3
}

for tool in podman python3; do
  command -v "$tool" >/dev/null || { echo "error: $tool is missing" >&2; exit 2; }
done

# -- the base image ------------------------------------------------------------------------
if ((COLD)) && [[ $BASE_IMAGE == "$LOCAL_BASE" ]]; then
  podman rmi -f "$IMAGE" "$LOCAL_BASE" >/dev/null 2>&1
fi
if ! podman image exists "$BASE_IMAGE"; then
  t=$(date +%s)
  if [[ $BASE_IMAGE == "$LOCAL_BASE" ]]; then
    bash scripts/container-base.sh "$LOCAL_BASE"
    case $? in
      0) ;;
      2) cannot "the local base image needs root, debootstrap and a Debian mirror (see above)" ;;
      *) record FAIL "base image" "container-base.sh failed"; finish ;;
    esac
  else
    podman pull "$BASE_IMAGE" || { record FAIL "base image" "cannot pull $BASE_IMAGE"; finish; }
  fi
  record PASS "base image" "$BASE_IMAGE ready in $(elapsed "$t")"
else
  record PASS "base image" "$BASE_IMAGE (already here)"
fi

# -- how podman runs containers on this host ---------------------------------------------------
# Some sandboxes forbid raising rlimits past the host's (podman raises nofile/nproc by default)
# or mount cgroup v2 beside v1 with a controller crun refuses; try the plain way first.
ulimits=(--ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit "nproc=4096:4096")
run_flags=()
for candidate in "" "ulimits" "runc ulimits"; do
  flags=()
  [[ $candidate == *runc* ]] && flags+=(--runtime runc)
  [[ $candidate == *ulimits* ]] && flags+=("${ulimits[@]}")
  if podman run --rm "${flags[@]}" "$BASE_IMAGE" python --version >/dev/null 2>>"$log"; then
    run_flags=("${flags[@]}")
    [[ -n $candidate ]] && echo "note: podman's defaults fail on this host; using: ${flags[*]}"
    break
  fi
  [[ $candidate == "runc ulimits" ]] && {
    tail -3 "$log"
    cannot "podman found no runtime settings that start a container: $(tail -1 "$log")"
  }
done

# -- pip's settings, as build secrets ------------------------------------------------------
# Index URLs reachable from inside the build (http/https; file:// and local folders are
# not) and the CA bundle pip trusts, read from this host's pip configuration now.
pip_cmd=(python3 -m pip)
"${pip_cmd[@]}" --version >/dev/null 2>&1 || pip_cmd=(.venv/bin/python -m pip)
secrets=()
if "${pip_cmd[@]}" config list >"$work/pip-config" 2>/dev/null; then
  python3 - "$work" <<'PY'
import ast, sys
from pathlib import Path

work = Path(sys.argv[1])
values: dict[str, str] = {}
for line in (work / "pip-config").read_text().splitlines():  # scope.key='value'
    key, _, value = line.partition("=")
    name = key.rpartition(".")[2]
    if key.startswith(":env:") or name not in values:  # the environment wins, as in pip
        values[name] = ast.literal_eval(value)


def web(urls: str) -> str:
    return " ".join(u for u in urls.split() if u.startswith(("http://", "https://")))


conf = ["[global]"]
for name in ("index-url", "extra-index-url", "find-links"):
    if web(values.get(name, "")):
        conf.append(f"{name} = {web(values[name])}")
for name in ("trusted-host", "timeout", "default-timeout", "retries"):
    if name in values:
        conf.append(f"{name} = {values[name]}")
if values.get("cert") and Path(values["cert"]).is_file():
    conf.append("cert = /run/secrets/pip-cert")
    (work / "pip-cert-path").write_text(values["cert"])
(work / "pip.conf").write_text("\n".join(conf) + "\n")
print("pip settings for the build:", ", ".join(c.split(" =")[0] for c in conf[1:]) or "none")
PY
  secrets+=(--secret "id=pip.conf,src=$work/pip.conf")
  [[ -f $work/pip-cert-path ]] && secrets+=(--secret "id=pip-cert,src=$(cat "$work/pip-cert-path")")
fi

# -- build ---------------------------------------------------------------------------------
# --format docker: the OCI image format has no HEALTHCHECK, and podman drops it.
t=$(date +%s)
build_flags=(--format docker --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$IMAGE" -f Dockerfile)
((COLD)) && build_flags+=(--no-cache)
echo "building $IMAGE from Dockerfile on $BASE_IMAGE ..."
if podman build "${run_flags[@]}" "${secrets[@]}" "${build_flags[@]}" . >"$work/build.log" 2>&1; then
  record PASS "image builds" "$(elapsed "$t")"
else
  tail -30 "$work/build.log"
  record FAIL "image builds" "podman build failed after $(elapsed "$t")"
  finish
fi
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
base_size=$(podman image inspect --format '{{.Size}}' "$BASE_IMAGE")
size_text="$(numfmt --to=si "$size")B ($(numfmt --to=si $((size - base_size)))B over the base)"

# -- run -----------------------------------------------------------------------------------
# Admin routes on (no key) so that they are probed too; one intra-op thread keeps the long
# streams of the drain check long enough to stop mid-way on any machine.
t=$(date +%s)
if ! podman run -d --name "$NAME" "${run_flags[@]}" -p 127.0.0.1::8002 \
  -e GENAI_ADMIN=true -e GENAI_INTRA_OP_THREADS=1 "$IMAGE" >/dev/null 2>>"$log"; then
  tail -3 "$log"
  record FAIL "container starts" "podman run failed"
  finish
fi
address=$(podman port "$NAME" 8002 | head -n1)
base_url="http://$address"

# The image's HEALTHCHECK, run the way podman's timer runs it (the timer needs systemd).
health=""
for _ in $(seq 1 120); do
  if podman healthcheck run "$NAME" >/dev/null 2>>"$log"; then
    health=$(podman inspect --format '{{.State.Health.Status}}' "$NAME" 2>/dev/null)
    break
  fi
  [[ $(podman inspect --format '{{.State.Running}}' "$NAME") == true ]] || break
  sleep 1
done
if [[ $health == healthy ]]; then
  record PASS "HEALTHCHECK healthy" "after $(elapsed "$t") (podman healthcheck run; inspect: $health)"
else
  podman logs --tail 20 "$NAME" 2>&1
  record FAIL "HEALTHCHECK healthy" "status '${health:-none}' after $(elapsed "$t")"
  finish
fi

user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
uid=$(podman exec "$NAME" sh -c 'grep "^Uid:" /proc/1/status' 2>>"$log" | awk '{print $2}')
if [[ -n $uid && $uid != 0 ]]; then
  record PASS "runs as non-root" "server process uid $uid (image USER $user)"
else
  record FAIL "runs as non-root" "server process uid '${uid:-?}' (image USER '$user')"
fi

# -- every route ---------------------------------------------------------------------------
page=()
[[ -f web/index.html ]] && page=(--page)
t=$(date +%s)
if python3 scripts/container_probe.py routes "$base_url" "${page[@]}" | tee "$work/routes.log"; then
  record PASS "every route answers" "$(tail -n1 "$work/routes.log"), $(elapsed "$t")"
else
  record FAIL "every route answers" "$(tail -n1 "$work/routes.log")"
fi

# -- SIGTERM drains ------------------------------------------------------------------------
t=$(date +%s)
stop="podman stop -t 30 $NAME >/dev/null 2>>$log"
python3 scripts/container_probe.py drain "$base_url" -- sh -c "$stop"
drained=$?
code=$(podman inspect --format '{{.State.ExitCode}}' "$NAME")
if ((drained == 0)) && [[ $code == 0 ]]; then
  record PASS "SIGTERM drains streams" "streams ended with [DONE], exit code 0, $(elapsed "$t")"
else
  podman logs --tail 10 "$NAME" 2>&1
  record FAIL "SIGTERM drains streams" "probe status $drained, container exit code $code"
fi

record INFO "image size" "$size_text"
finish

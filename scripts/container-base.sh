#!/usr/bin/env bash
# Build a local Debian-based Python base image from Debian packages, for machines that cannot
# pull python:3.11-slim from a registry. It offers what the Dockerfile needs from that image:
# `python` (3.11 in bookworm) with `venv`, CA certificates, `useradd`, a shell.
#
#   sudo bash scripts/container-base.sh [IMAGE]     # default: localhost/python-debian:bookworm
#
# Then: podman build --build-arg BASE_IMAGE=localhost/python-debian:bookworm .
# Needs root, podman and debootstrap (Debian: apt-get install podman debootstrap); takes about
# 1.5 min. The Debian mirror is the one this host's apt uses; set DEBIAN_MIRROR to choose.
set -euo pipefail

IMAGE="${1:-localhost/python-debian:bookworm}"
SUITE="${DEBIAN_SUITE:-bookworm}"
PACKAGES="python3,python3-venv,python-is-python3,ca-certificates"

for tool in podman debootstrap; do
  command -v "$tool" >/dev/null || { echo "error: $tool is missing (apt-get install $tool)" >&2; exit 2; }
done
if [[ $(id -u) != 0 ]]; then
  echo "error: debootstrap needs root" >&2
  exit 2
fi

mirror="${DEBIAN_MIRROR:-}"
if [[ -z $mirror ]] && command -v apt-get >/dev/null; then
  # The Debian archive this host's apt already uses (no host name is written in this repo).
  # shellcheck disable=SC2016  # $(REPO_URI) is apt's field, not the shell's
  mirror=$(apt-get indextargets --format '$(REPO_URI)' "Label: Debian" "Codename: $SUITE" \
    "Component: main" "Created-By: Packages" 2>/dev/null | grep -v -- '-security/' | head -n1 || true)
fi
if [[ -z $mirror ]]; then
  echo "error: no Debian mirror for $SUITE in this host's apt sources; set DEBIAN_MIRROR" >&2
  exit 2
fi

rootfs=$(mktemp -d)
cleanup() {
  # debootstrap mounts /proc and /sys in the target; a failed run can leave them there.
  for mount in "$rootfs"/proc "$rootfs"/sys; do
    mountpoint -q "$mount" && umount -l "$mount"
  done
  rm -rf "$rootfs"
}
trap cleanup EXIT

echo "debootstrap $SUITE ($PACKAGES) from $mirror ..."
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$mirror" >/dev/null

# What a slim image leaves out: package caches, apt lists, documentation.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
  "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
  "$rootfs"/usr/share/info/*

tar --numeric-owner --xattrs -C "$rootfs" -c . | podman import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  --message "debootstrap $SUITE minbase + $PACKAGES" \
  - "$IMAGE" >/dev/null

echo "built $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE" | numfmt --to=si)B)"
